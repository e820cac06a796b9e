"""`ListTasks` as the A2A adapter reads it, and which broken first requests need it
(over httpx2's mock transport; the real peer: tests/adapters/test_a2a_orphans.py)."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from band_trio import UpstreamPolicy
from band_trio.adapters._a2a_lookup import _never_taken
from band_trio.adapters._a2a_rpc import Rpc
from band_trio.adapters._a2a_wire import V03, V1, A2ARpcError
from band_trio.contract import UpstreamFault


def task(task_id: str, *message_ids: str) -> dict[str, Any]:
    history = [
        {"messageId": m, "role": "ROLE_USER", "parts": [{"text": "hi"}]} for m in message_ids
    ]
    return {"id": task_id, "status": {"state": "TASK_STATE_WORKING"}, "history": history}


def lister(pages: dict[str, dict[str, Any]], seen: list[dict[str, Any]]) -> Rpc:
    """A peer whose `ListTasks` answers the page named by `pageToken` ("" the first)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        rpc = json.loads(request.content)
        assert rpc["method"] == "ListTasks"
        seen.append(rpc["params"])
        page = pages[rpc["params"].get("pageToken", "")]
        return httpx2.Response(200, json={"jsonrpc": "2.0", "id": rpc["id"], "result": page})

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    return Rpc(client, "http://127.0.0.1:9/", V1, poll_interval=0.01, upstream=UpstreamPolicy())


async def test_the_task_holding_our_message_is_found_page_after_page() -> None:
    seen: list[dict[str, Any]] = []
    pages = {
        "": {"tasks": [task("a", "m1"), task("b", "m2")], "nextPageToken": "p2"},
        "p2": {"tasks": [task("c", "m3", "ours")], "nextPageToken": "p3"},
    }
    found = await lister(pages, seen).find("ours", "ctx")
    assert found is not None and found.id == "c"
    assert [p.get("pageToken") for p in seen] == [None, "p2"]
    assert all(p["contextId"] == "ctx" for p in seen)


async def test_no_such_task_is_none_and_a_repeated_page_token_ends_the_listing() -> None:
    seen: list[dict[str, Any]] = []
    pages = {
        "": {"tasks": [task("a", "m1")], "nextPageToken": "again"},
        "again": {"tasks": [task("b", "m2")], "nextPageToken": "again"},
    }
    assert await lister(pages, seen).find("ours", None) is None
    assert len(seen) == 2
    assert all("contextId" not in p for p in seen)  # a room's first turn: no context yet


async def test_the_0_3_dialect_has_no_list_tasks() -> None:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(500)))
    rpc = Rpc(client, "http://127.0.0.1:9/", V03, poll_interval=0.01, upstream=UpstreamPolicy())
    with pytest.raises(A2ARpcError) as raised:
        await rpc.find("ours", None)
    assert raised.value.code == -32601


@pytest.mark.parametrize(
    ("error", "never_taken"),
    [
        (httpx2.ConnectError("refused"), True),
        (httpx2.ConnectTimeout("slow"), True),
        (UpstreamFault.status(429), True),
        (UpstreamFault.status(503), True),
        (UpstreamFault.status(408), True),
        (UpstreamFault.status(500), False),
        (UpstreamFault.status(502), False),
        (httpx2.ReadError("reset"), False),
        (httpx2.ReadTimeout("silent"), False),
        (UpstreamFault.dropped("cut"), False),
        (UpstreamFault.truncated("ended"), False),
        (ValueError("a corrupt frame"), False),
    ],
)
def test_only_a_request_never_sent_or_refused_needs_no_lookup(
    error: Exception, never_taken: bool
) -> None:
    assert _never_taken(error) is never_taken
