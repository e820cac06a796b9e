"""What the agent routes that write refuse, as band-client-rest 0.0.51 documents it:
`/failed` without its `error`, a message without a mention or over 512 KiB, an
attachment the room does not hold, an event of an unknown type or over its caps,
an activity detail that breaks its rules. Real loopback HTTP."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from platform_client import room_path

from band_trio.platform import Platform


def assert_422(response: httpx2.Response, code: str = "validation_error") -> None:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == code and isinstance(error["message"], str)


async def test_failed_needs_its_error(platform: Platform, client: httpx2.AsyncClient) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    message = platform.post_message(room, user, "x")
    mark = room_path(room, f"/messages/{message}")
    await client.post(f"{mark}/processing")
    for body in (b"", b"{}", b'{"error": null}'):
        assert_422(await client.post(f"{mark}/failed", content=body))
    assert platform.delivery(message)[platform.info.agent_id or ""]["status"] == "processing"
    assert (await client.post(f"{mark}/failed", json={"error": "boom"})).status_code == 200


def message(content: str = "hi", **fields: Any) -> dict[str, Any]:
    return {"message": {"content": content, **fields}}


async def test_a_message_needs_a_mention_and_at_most_512_kib(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    path = room_path(room, "/messages")
    to_user = [{"id": user}]
    assert_422(await client.post(path, json=message(mentions=[])))
    assert_422(await client.post(path, json=message()))  # mentions is required
    big = "é" * (256 * 1024 + 1)  # 256 Ki characters, over 512 KiB of UTF-8
    assert_422(await client.post(path, json=message(big, mentions=to_user)))
    at_limit = "x" * (512 * 1024)
    assert (await client.post(path, json=message(at_limit, mentions=to_user))).status_code == 201
    assert platform.stats["errors"] == 0


async def test_an_attachment_the_room_does_not_hold_refuses_the_whole_message(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    path = room_path(room, "/messages")
    before = len(platform.messages(room))
    with_file = message(mentions=[{"id": user}], attachment_ids=["3fa85f64-5717"])
    assert_422(await client.post(path, json=with_file), "unknown_attachment")
    assert len(platform.messages(room)) == before  # nothing written
    empty = message(mentions=[{"id": user}], attachment_ids=[])
    assert (await client.post(path, json=empty)).status_code == 201


@pytest.mark.parametrize(
    "event",
    [
        {"content": "x", "message_type": "chat"},
        {"content": "x" * 16385, "message_type": "thought"},
        {"content": "x", "message_type": "thought", "metadata": {"blob": "y" * 65536}},
        {"content": "x", "message_type": "attention", "metadata": {}},
        {"content": "x", "message_type": "attention", "metadata": {"kind": "nag"}},
    ],
    ids=["unknown type", "content over 16384", "metadata over 64 KiB", "attention, no kind",
         "attention, bad kind"],
)  # fmt: skip
async def test_an_event_outside_its_rules_is_a_422(
    platform: Platform, client: httpx2.AsyncClient, event: dict[str, Any]
) -> None:
    room = platform.info.room_id or ""
    assert_422(await client.post(room_path(room, "/events"), json={"event": event}))
    assert platform.store.events(room) == []


async def test_events_of_every_documented_type_are_created(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room = platform.info.room_id or ""
    kinds = ["tool_call", "tool_result", "thought", "error", "task"]
    for kind in kinds:
        body = {"event": {"content": "x" * 16384, "message_type": kind}}
        assert (await client.post(room_path(room, "/events"), json=body)).status_code == 201
    attention = {"content": "?", "message_type": "attention", "metadata": {"kind": "question"}}
    assert (
        await client.post(room_path(room, "/events"), json={"event": attention})
    ).status_code == 201
    assert [e["message_type"] for e in platform.store.events(room)] == [*kinds, "attention"]


@pytest.mark.parametrize(
    ("activity", "ok"),
    [
        (None, True),
        ({"kind": "reasoning"}, True),
        ({"kind": "tool_call", "name": "Bash"}, True),
        ({"kind": "memory"}, True),
        ({"kind": "permission"}, True),
        ({"kind": "tool_call"}, False),  # a tool call names its tool
        ({"kind": "reasoning", "name": "Bash"}, False),  # and nothing else does
        ({"kind": "dreaming"}, False),
        ({}, False),
    ],
)
async def test_the_activity_detail_follows_its_rules(
    platform: Platform, client: httpx2.AsyncClient, activity: Any, ok: bool
) -> None:
    room = platform.info.room_id or ""
    response = await client.post(
        room_path(room, "/activity"), json={"working": True, "activity": activity}
    )
    if ok:
        assert response.json() == {"data": {"working": True}}
    else:
        assert_422(response)
