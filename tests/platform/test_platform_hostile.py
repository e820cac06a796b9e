"""Hostile input to the platform: deep nesting, oversized bodies, odd ids, a long run.

Whatever a client sends, the platform answers with the error envelope (never a
500 or a traceback), keeps serving, and keeps its memory bounded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from platform_client import DEADLINE, join, recv, send, ws_connect
from trio_websocket import ConnectionClosed

from band_trio.platform import Platform, open_platform
from band_trio.policy import PlatformPolicy
from seed_rotation import examples

SMALL = PlatformPolicy(max_request_body=4096, log_entries=50, log_text_limit=64)


@pytest.fixture
async def small() -> AsyncIterator[Platform]:
    """A platform with small limits, so that "too large" is cheap to reach."""
    async with open_platform(seed=True, policy=SMALL) as running:
        yield running


JSON = {"content-type": "application/json"}
"""A body the platform reads says it is JSON; any other is refused unread (415)."""


def json_routes(platform: Platform) -> list[tuple[str, str, dict[str, str]]]:
    """(method, URL, headers) of every route that reads a JSON body."""
    info = platform.info
    room, key = info.room_id, info.api_key or ""
    message = platform.post_message(room or "", info.user_id or "", "target")
    agent_api = f"{info.rest_url}/api/v1/agent/chats/{room}"
    auth = {"X-API-Key": key, **JSON}
    admin = info.admin_url
    return [
        ("POST", f"{agent_api}/messages", auth),
        ("POST", f"{agent_api}/events", auth),
        ("POST", f"{agent_api}/activity", auth),
        ("POST", f"{agent_api}/messages/{message}/failed", auth),
        ("POST", f"{admin}/agents", JSON),
        ("POST", f"{admin}/users", JSON),
        ("POST", f"{admin}/rooms", JSON),
        ("POST", f"{admin}/rooms/{room}/participants", JSON),
        ("POST", f"{admin}/rooms/{room}/messages", JSON),
        ("POST", f"{admin}/control", JSON),
        ("POST", f"{admin}/faults/rest", JSON),
        ("POST", f"{admin}/faults/drop", JSON),
        ("POST", f"{admin}/faults/close", JSON),
        ("POST", f"{admin}/faults/upgrades", JSON),
        ("POST", f"{admin}/faults/heartbeats", JSON),
        ("POST", f"{admin}/faults/supersede", JSON),
        ("POST", f"{admin}/faults/joins", JSON),
        ("POST", f"{admin}/faults/hold", JSON),
        ("POST", f"{admin}/faults/release", JSON),
    ]


def nested(depth: int, opener: str) -> bytes:
    """A value nested `depth` levels deep, under a key every route's decoder must walk."""
    closer = {"[": "]", '{"a":': "}"}[opener]
    return ('{"deep":' + opener * depth + "0" + closer * depth + "}").encode()


def assert_envelope(response: httpx2.Response, *statuses: int) -> None:
    assert response.status_code in statuses, (response.request.url, response.text[:200])
    error = response.json()["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(1_000, 20_000), opener=st.sampled_from(["[", '{"a":']))
def test_deep_json_on_every_json_route_is_a_4xx_never_a_500(depth: int, opener: str) -> None:
    async def main() -> None:
        async with open_platform(seed=True) as platform:
            body = nested(depth, opener)
            async with httpx2.AsyncClient(timeout=DEADLINE) as client:
                for method, url, headers in json_routes(platform):
                    response = await client.request(method, url, content=body, headers=headers)
                    assert response.status_code != 500, url
                    if response.status_code >= 400:  # unreadable, or not the schema
                        assert_envelope(response, 400, 422)
                # ...and the platform still serves
                me = await client.get(
                    f"{platform.info.rest_url}/api/v1/agent/me",
                    headers={"X-API-Key": platform.info.api_key or ""},
                )
                assert me.status_code == 200
            assert platform.stats["errors"] == 0

    trio.run(main)


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(SMALL.max_request_body + 1, 4 * SMALL.max_request_body))
def test_an_oversized_body_on_any_route_is_a_413(size: int) -> None:
    async def main() -> None:
        async with open_platform(seed=True, policy=SMALL) as platform:
            body = b"[" + b"0," * (size // 2) + b"0]"
            async with httpx2.AsyncClient(timeout=DEADLINE) as client:
                routes = [*json_routes(platform), ("POST", f"{platform.info.rest_url}/nope", JSON)]
                for method, url, headers in routes:
                    response = await client.request(method, url, content=body, headers=headers)
                    assert_envelope(response, 413)
            assert platform.stats["bodies_too_large"] == len(routes)
            assert platform.stats["errors"] == 0

    trio.run(main)


async def test_deep_json_in_a_free_form_field_is_a_400(platform: Platform) -> None:
    info = platform.info
    deep = "[" * 10_000 + "]" * 10_000
    event = f'{{"event":{{"content":"x","message_type":"thought","metadata":{{"a":{deep}}}}}}}'
    async with httpx2.AsyncClient(
        base_url=f"{info.rest_url}/api/v1/agent", headers={"X-API-Key": info.api_key or "", **JSON}
    ) as client:
        posted = await client.post(f"/chats/{info.room_id}/events", content=event.encode())
    assert_envelope(posted, 400)
    assert "nested too deeply" in posted.json()["error"]["message"]
    assert platform.stats["errors"] == 0


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(1_000, 50_000), opener=st.sampled_from(["[", '{"a":']))
def test_deep_json_on_the_websocket_is_a_bad_frame(depth: int, opener: str) -> None:
    async def main() -> None:
        async with open_platform(seed=True) as platform:
            agent = platform.info.agent_id
            deep = nested(depth, opener).decode()
            async with ws_connect(platform) as ws:
                await ws.send_message(f'["2","2","agent_control:{agent}","phx_join",{deep}]')
                await ws.send_message(deep)
                # the connection still works: a join is answered (a payload shallow
                # enough to read is just a join, and answered too)
                await send(ws, "9", "9", f"agent_rooms:{agent}", "phx_join", {})
                with trio.fail_after(DEADLINE):
                    while (reply := await recv(ws))[1] != "9":
                        assert reply[1] == "2"
                assert reply[4]["status"] == "ok"
            assert platform.stats["bad_frames"] >= 1  # the bare nested value at least
            assert platform.stats["frame_errors"] == 0

    trio.run(main)


async def test_a_websocket_message_over_the_limit_closes_that_socket_only() -> None:
    policy = PlatformPolicy(max_ws_message=64 * 1024)
    async with open_platform(seed=True, policy=policy) as platform:
        async with ws_connect(platform) as ws:
            await ws.send_message("[" + " " * (100 * 1024) + "]")
            with trio.fail_after(DEADLINE), pytest.raises(ConnectionClosed) as closed:
                await ws.get_message()
        assert closed.value.reason is not None and closed.value.reason.code == 1009
        async with ws_connect(platform) as ws:  # the platform serves the next one
            agent = platform.info.agent_id
            assert (await join(ws, "1", f"agent_control:{agent}"))["status"] == "ok"
        assert platform.stats["errors"] == platform.stats["socket_errors"] == 0


async def test_a_duplicate_room_id_is_a_422(platform: Platform) -> None:
    async with httpx2.AsyncClient(base_url=platform.info.admin_url) as admin:
        first = await admin.post("/rooms", json={"id": "room-1"})
        assert first.status_code == 201
        assert_envelope(await admin.post("/rooms", json={"id": "room-1"}), 422)
        assert platform.stats["errors"] == 0


INVISIBLE = ["\u200b", "\u202e", "\u2066", "\u200b\u200c\u2060", "\ufeff \u00ad", "\u2028"]
"""Ids made only of zero-width, format or bidi characters: nothing to tell apart."""
BIDI = ["room\u202egnp.exe", "a\u2066b\u2069", "\u200fx", "x\u061c"]
"""Ids with a bidi control: shown reordered in a log or a console, unlike what was sent."""


@pytest.mark.parametrize(
    "bad", ["a/b", "", " ", "x" * 129, "tab\there", "nul\x00", *INVISIBLE, *BIDI], ids=ascii
)
async def test_ids_no_route_could_address_are_refused(platform: Platform, bad: str) -> None:
    async with httpx2.AsyncClient(base_url=platform.info.admin_url) as admin:
        for path in ("/rooms", "/agents", "/users"):
            assert_envelope(await admin.post(path, json={"id": bad}), 422)


@pytest.mark.parametrize("good", ["r?1#%", "über raum", "👩\u200d💻", "a\u00adb"], ids=ascii)
async def test_ids_a_person_can_read_are_taken(platform: Platform, good: str) -> None:
    async with httpx2.AsyncClient(base_url=platform.info.admin_url) as admin:
        assert (await admin.post("/rooms", json={"id": good})).status_code == 201


async def test_the_request_log_is_a_bounded_ring_with_short_bodies(small: Platform) -> None:
    info = small.info
    async with httpx2.AsyncClient(base_url=info.rest_url, headers=JSON) as client:
        for _ in range(200):
            await client.post("/unknown", content=b"y" * 1000)
    log = small.request_log
    assert len(log.entries) == SMALL.log_entries  # the newest only
    assert log.next_seq == 400  # each unknown route is a note and a rest entry
    assert small.stats["log_evicted"] == log.next_seq - SMALL.log_entries
    newest = small.log(log.next_seq - 3)
    assert [e.seq for e in newest] == [log.next_seq - 3, log.next_seq - 2, log.next_seq - 1]
    assert small.log(0)[0].seq == log.next_seq - SMALL.log_entries  # since 0: what is held
    bodies = [e.body for e in log.entries if e.kind == "rest"]
    assert bodies and all(b is not None and len(b) < 100 for b in bodies)
    assert all(b is not None and b.endswith("[1000 characters]") for b in bodies)
    mark = log.next_seq
    async with httpx2.AsyncClient(base_url=info.admin_url) as admin:
        page = (await admin.get("/log", params={"since": mark - 2})).json()
    assert page["next"] == mark  # its own entry comes after the page
    assert [e["seq"] for e in page["entries"]] == [mark - 2, mark - 1]


async def test_a_chunked_body_is_cut_off_at_the_limit(small: Platform) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):  # no content-length: read until the limit, then refused
            yield b"z" * 1000

    async with httpx2.AsyncClient(
        base_url=small.info.rest_url, timeout=DEADLINE, headers=JSON
    ) as client:
        response = await client.post("/nope", content=chunks())
    assert_envelope(response, 413)


async def test_a_declared_length_over_the_limit_is_refused_before_any_body_arrives(
    small: Platform,
) -> None:
    port = int(small.info.rest_url.rsplit(":", 1)[1])
    with trio.fail_after(DEADLINE):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(
                b"POST /nope HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
                b"content-length: 100000000\r\n\r\n" % port
            )  # ...and the 100 MB never come: the answer must not wait for them
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = await stream.receive_some()
                assert chunk, answer
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 413")


_PARAMS = ("status", "limit", "cursor", "sort_order", "page", "page_size")
_VALUES = (
    st.sampled_from(["pending", "processing", "processed", "failed", "all", "asc", "desc"])
    | st.integers(-(2**70), 2**70).map(str)
    | st.text(max_size=40)
)
_QUERIES = st.lists(st.tuples(st.sampled_from(_PARAMS), _VALUES), max_size=6)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries=st.lists(_QUERIES, min_size=1, max_size=12))
def test_any_query_on_the_paginated_routes_is_a_page_or_an_envelope(
    queries: list[list[tuple[str, str]]],
) -> None:
    """The list's and the context's parameters, in any combination, with any value
    (odd characters, huge or negative numbers, repeated keys): a well-formed page or
    a 4xx envelope, never a 500; a page holds at most its limit, says `has_more`
    exactly when it gives a cursor, and holds only messages its filter admits."""

    async def main() -> None:
        async with open_platform(seed=True) as platform:
            info = platform.info
            room, user = info.room_id or "", info.user_id or ""
            posted = [platform.post_message(room, user, f"m{n}") for n in range(5)]
            headers = {"X-API-Key": info.api_key or ""}
            base = f"{info.rest_url}/api/v1/agent/chats/{room}"
            async with httpx2.AsyncClient(timeout=DEADLINE, headers=headers) as client:
                await client.post(f"{base}/messages/{posted[0]}/processing")
                await client.post(f"{base}/messages/{posted[0]}/processed")
                for query in queries:
                    for route in ("/messages", "/context"):
                        response = await client.get(f"{base}{route}", params=query)
                        if response.status_code >= 400:
                            assert_envelope(response, 400, 422)
                            continue
                        assert response.status_code == 200
                        given = {k: v for k, v in query if v}  # a blank value is no value
                        _check_page(response.json(), given, route, posted)
            assert platform.stats["errors"] == 0

    trio.run(main)


def _check_page(body: dict[str, Any], query: dict[str, str], route: str, posted: list[str]) -> None:
    meta, data = body["metadata"], body["data"]
    assert 1 <= meta["limit"] <= 100 and len(data) <= meta["limit"]
    ids = [m["id"] for m in data]
    assert set(ids) <= set(posted) and len(set(ids)) == len(ids)
    if "page" in meta:
        assert meta["has_more"] == (meta["page"] < meta["total_pages"])
    else:
        assert meta["has_more"] == ("next_cursor" in meta)
    if route == "/messages":
        status = query.get("status")
        if status is None:
            assert posted[0] not in ids  # processed: left out by default
        elif status != "all":
            agent_statuses = {s for m in data for s in _statuses(m)}
            admitted = {"pending": {"delivered", "failed"}}.get(status, {status})
            assert agent_statuses <= admitted


def _statuses(message: dict[str, Any]) -> list[str]:
    return [d["status"] for d in message["metadata"]["delivery_status"].values()]
