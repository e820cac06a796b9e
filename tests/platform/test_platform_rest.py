"""The agent REST API over real loopback HTTP (docs/reference/platform.md, the routes)."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from platform_client import room_path

from band_trio.platform import Platform


def assert_envelope(response: httpx2.Response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    for key in ("code", "message", "request_id"):
        assert isinstance(error[key], str), error
    if code is not None:
        assert error["code"] == code


def new_agent(platform: Platform, **kwargs: Any) -> tuple[str, httpx2.AsyncClient]:
    agent = platform.create_agent(**kwargs)
    assert agent.id
    assert agent.api_key
    client = httpx2.AsyncClient(
        base_url=platform.info.rest_url, headers={"X-API-Key": agent.api_key}
    )
    return agent.id, client


async def test_missing_or_wrong_key_is_401(platform: Platform) -> None:
    async with httpx2.AsyncClient(base_url=platform.info.rest_url) as anon:
        assert_envelope(await anon.get("/api/v1/agent/me"), 401, "unauthorized")
        wrong = await anon.get("/api/v1/agent/me", headers={"X-API-Key": "nope"})
        assert_envelope(wrong, 401, "unauthorized")


async def test_me(platform: Platform, client: httpx2.AsyncClient) -> None:
    response = await client.get("/api/v1/agent/me")
    assert response.status_code == 200
    me = response.json()["data"]
    assert me["id"] == platform.info.agent_id
    assert me["description"]
    assert me["feature_flags"] == {}
    for key in ("name", "handle", "owner_uuid", "inserted_at", "updated_at"):
        assert isinstance(me[key], str)


async def test_malformed_json_is_400_and_bad_schema_is_422(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    path = room_path(platform.info.room_id or "", "/activity")
    bad = await client.post(
        path, content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_envelope(bad, 400, "bad_request")
    wrong = await client.post(path, json={"working": "yes"})
    assert_envelope(wrong, 422, "validation_error")


async def test_unknown_route_is_404_and_logged(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    assert_envelope(await client.get("/api/v1/agent/nowhere"), 404, "not_found")
    assert_envelope(await client.delete("/api/v1/agent/me"), 404, "not_found")
    assert_envelope(await client.get("/elsewhere"), 404, "not_found")
    assert platform.stats["unhandled_routes"] == 3
    notes = [e for e in platform.log() if e.kind == "note" and e.body == "unhandled_route"]
    assert [e.path for e in notes] == ["/api/v1/agent/nowhere", "/api/v1/agent/me", "/elsewhere"]


async def test_chats_are_paginated(platform: Platform) -> None:
    agent_id, client = new_agent(platform)
    async with client:
        for n in range(3):
            platform.create_room(f"r{n}", [agent_id])
        first = (await client.get("/api/v1/agent/chats", params={"page": 1, "page_size": 2})).json()
        second = (await client.get("/api/v1/agent/chats?page=2&page_size=2")).json()
    assert first["metadata"] == {"page": 1, "page_size": 2, "total_count": 3, "total_pages": 2}
    assert len(first["data"]) == 2
    assert len(second["data"]) == 1
    titles = {r["title"] for r in first["data"] + second["data"]}
    assert titles == {"r0", "r1", "r2"}


async def test_room_endpoints_need_membership(platform: Platform) -> None:
    _, outsider = new_agent(platform)
    room = platform.info.room_id or ""
    async with outsider:
        post = {"message": {"content": "x", "mentions": []}}
        for response in [
            await outsider.get(room_path(room, "/messages/next")),
            await outsider.get(room_path(room, "/participants")),
            await outsider.post(room_path(room, "/activity"), json={"working": True}),
            await outsider.post(room_path(room, "/messages"), json=post),
        ]:
            assert_envelope(response, 404, "not_found")


async def test_message_lifecycle(platform: Platform, client: httpx2.AsyncClient) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    assert (await client.get(room_path(room, "/messages/next"))).status_code == 204
    first = platform.post_message(room, user, "first")
    second = platform.post_message(room, user, "second")

    nxt = await client.get(room_path(room, "/messages/next"))
    assert nxt.status_code == 200
    message = nxt.json()["data"]
    assert message["id"] == first
    assert message["metadata"]["delivery_status"][platform.info.agent_id]["status"] == "delivered"

    mark = room_path(room, f"/messages/{first}")
    processed = await client.post(f"{mark}/processed")
    assert_envelope(processed, 422, "validation_error")
    assert "/processing_attempt" in processed.json()["error"]["details"]

    claim = await client.post(f"{mark}/processing")
    assert claim.status_code == 200
    assert claim.json() == {
        "data": {"id": first, "status": "processing", "attempt_number": 1, "success": True}
    }
    again = await client.post(f"{mark}/processing")
    assert again.json()["data"]["attempt_number"] == 1  # idempotent while live
    # A message that is processing is still actionable: crash recovery and play replay.
    assert (await client.get(room_path(room, "/messages/next"))).json()["data"]["id"] == first

    done = await client.post(f"{mark}/processed")
    assert done.status_code == 200
    assert done.json()["data"] == {
        "id": first, "status": "processed", "attempt_number": 1, "success": True
    }  # fmt: skip
    assert platform.delivery(first) == {
        platform.info.agent_id: {"status": "processed", "attempts": 1}
    }
    assert (await client.get(room_path(room, "/messages/next"))).json()["data"]["id"] == second

    # `processed` is not terminal (band-client-rest 0.0.51): a later claim opens a new
    # attempt, re-opening the message, and /next serves it again
    late = await client.post(f"{mark}/processing")
    assert late.status_code == 200
    assert late.json()["data"] == {
        "id": first, "status": "processing", "attempt_number": 2, "success": True
    }  # fmt: skip
    assert platform.delivery(first) == {
        platform.info.agent_id: {"status": "processing", "attempts": 2}
    }
    assert (await client.get(room_path(room, "/messages/next"))).json()["data"]["id"] == first
    assert platform.stats["reopened"] == 1  # counted, and noted in the log:
    (note,) = [e for e in platform.log() if e.kind == "note" and e.body == "reopened"]
    assert note.path == f"{mark}/processing" and note.agent_id == platform.info.agent_id
    assert (await client.post(f"{mark}/processed")).json()["data"]["attempt_number"] == 2

    # `failed` is not: the next /processing opens a new attempt
    other = room_path(room, f"/messages/{second}")
    assert (await client.post(f"{other}/processing")).json()["data"]["attempt_number"] == 1
    failed = await client.post(f"{other}/failed", json={"error": "RuntimeError"})
    assert failed.status_code == 200
    assert failed.json()["data"]["status"] == "failed"
    assert (await client.post(f"{other}/processing")).json()["data"]["attempt_number"] == 2
    assert (await client.post(f"{other}/failed", json={"error": "again"})).status_code == 200
    assert platform.delivery(second)[platform.info.agent_id or ""] == {
        "status": "failed",
        "attempts": 2,
    }
    # failed stays at the head of /next
    assert (await client.get(room_path(room, "/messages/next"))).json()["data"]["id"] == second

    missing = await client.post(room_path(room, "/messages/nope/processing"))
    assert_envelope(missing, 404, "not_found")


async def test_message_of_another_room_is_404(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    agent, user = platform.info.agent_id or "", platform.info.user_id or ""
    other = platform.create_room("other", [user, agent]).id or ""
    message = platform.post_message(other, user, "elsewhere")
    wrong_room = room_path(platform.info.room_id or "", f"/messages/{message}/processing")
    assert_envelope(await client.post(wrong_room), 404, "not_found")


async def test_stopped_room_gates_everything(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    agent, room, user = (
        platform.info.agent_id or "",
        platform.info.room_id or "",
        platform.info.user_id or "",
    )
    message = platform.post_message(room, user, "hi")
    mark = room_path(room, f"/messages/{message}")
    assert (await client.post(f"{mark}/processing")).status_code == 200

    platform.send_control(agent, "stop", room_id=room)
    next_ = await client.get(room_path(room, "/messages/next"))
    assert (next_.status_code, next_.content) == (204, b"")
    for tail in ("processing", "processed", "failed"):
        response = await client.post(f"{mark}/{tail}")
        assert (response.status_code, response.content) == (204, b"")
    post = await client.post(
        room_path(room, "/messages"), json={"message": {"content": "x", "mentions": [{"id": user}]}}
    )
    assert_envelope(post, 403, "forbidden")
    assert "execution is stopped" in post.json()["error"]["message"].lower()
    event = {"event": {"content": "boom", "message_type": "error"}}
    assert_envelope(await client.post(room_path(room, "/events"), json=event), 403, "forbidden")
    activity = await client.post(room_path(room, "/activity"), json={"working": True})
    assert activity.json() == {"data": {"working": False}}
    assert platform.delivery(message)[agent]["status"] == "processing"

    platform.send_control(agent, "play", room_id=room)
    assert (await client.get(room_path(room, "/messages/next"))).json()["data"]["id"] == message
    # Same attempt on replay: the claim is idempotent while processing.
    claim = await client.post(f"{mark}/processing")
    assert claim.json()["data"]["attempt_number"] == 1
    activity = await client.post(room_path(room, "/activity"), json={"working": True})
    assert activity.json() == {"data": {"working": True}}


async def test_agent_scope_stop_gates_every_room(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    agent, user = platform.info.agent_id or "", platform.info.user_id or ""
    other = platform.create_room("other", [user, agent]).id or ""
    platform.post_message(other, user, "x")
    platform.send_control(agent, "stop")
    for room in (platform.info.room_id or "", other):
        assert (await client.get(room_path(room, "/messages/next"))).status_code == 204
    platform.send_control(agent, "interrupt")  # leaves the gate closed
    assert (await client.get(room_path(other, "/messages/next"))).status_code == 204
    platform.send_control(agent, "play")
    assert (await client.get(room_path(other, "/messages/next"))).status_code == 200


async def test_post_message_recipients(platform: Platform) -> None:
    user = platform.create_user(name="Bob", handle="bob").id or ""
    a, client_a = new_agent(platform, handle="a")
    b = platform.create_agent(handle="b").id or ""
    c = platform.create_agent(handle="c").id or ""
    outsider = platform.create_agent().id or ""
    room = platform.create_room("r", [user, a, b, c]).id or ""
    async with client_a:
        body = {
            "message": {
                "content": "@b @bob",
                "mentions": [{"id": b}, {"id": user, "handle": "bob"}, {"id": a}],
            }
        }
        posted = await client_a.post(room_path(room, "/messages"), json=body)
        assert posted.status_code == 201
        data = posted.json()["data"]
        assert data["success"] is True
        assert {r["id"]: r["handle"] for r in data["recipients"]} == {b: "b", user: "bob"}
        assert platform.delivery(data["id"]) == {b: {"status": "delivered", "attempts": 0}}

        stranger = {"message": {"content": "x", "mentions": [{"id": outsider}]}}
        refused = await client_a.post(room_path(room, "/messages"), json=stranger)
        assert_envelope(refused, 422, "mentioned_participant_not_in_room")
    (message,) = [m for m in platform.messages(room) if m.id == data["id"]]
    assert (message.sender_id, message.sender_type, message.content) == (a, "Agent", "@b @bob")


async def test_participants_context_and_unprocessed_list(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    agent, room, user = (
        platform.info.agent_id or "",
        platform.info.room_id or "",
        platform.info.user_id or "",
    )
    roster = (await client.get(room_path(room, "/participants"))).json()["data"]
    assert [(p["id"], p["type"], p["role"]) for p in roster] == [
        (user, "User", "owner"),
        (agent, "Agent", "member"),
    ]
    ids = [platform.post_message(room, user, f"m{n}") for n in range(3)]
    reply = {"message": {"content": "done", "mentions": [{"id": user, "handle": "alice"}]}}
    own = (await client.post(room_path(room, "/messages"), json=reply)).json()["data"]["id"]
    context = (await client.get(room_path(room, "/context"))).json()
    assert [m["id"] for m in context["data"]] == [*ids, own]
    assert context["metadata"]["has_more"] is False
    assert context["metadata"]["limit"] == 50

    mark = room_path(room, f"/messages/{ids[0]}")
    await client.post(f"{mark}/processing")
    await client.post(f"{mark}/processed")
    page = (
        await client.get(room_path(room, "/messages"), params={"sort_order": "asc", "limit": 1})
    ).json()
    assert [m["id"] for m in page["data"]] == [ids[1]]
    assert page["metadata"]["has_more"] is True
    cursor = page["metadata"]["next_cursor"]
    rest = (
        await client.get(room_path(room, "/messages"), params={"limit": 5, "cursor": cursor})
    ).json()
    assert [m["id"] for m in rest["data"]] == [ids[2]]
    assert rest["metadata"] == {"has_more": False, "limit": 5}


async def test_events_are_created(platform: Platform, client: httpx2.AsyncClient) -> None:
    room = platform.info.room_id or ""
    body = {"event": {"content": "oops", "message_type": "error", "metadata": {"failure": {}}}}
    response = await client.post(room_path(room, "/events"), json=body)
    assert response.status_code == 201
    data = response.json()["data"]
    assert data["message_type"] == "error"
    assert data["success"] is True
    assert [e["content"] for e in platform.store.events(room)] == ["oops"]


@pytest.mark.parametrize("body", [b"", b"[]", b"null"])
async def test_odd_bodies_never_crash(
    platform: Platform, client: httpx2.AsyncClient, body: bytes
) -> None:
    room = platform.info.room_id or ""
    response = await client.post(room_path(room, "/messages"), content=body)
    assert response.status_code in (400, 422)
    assert platform.stats.get("errors", 0) == 0


async def test_rest_requests_are_logged(platform: Platform, client: httpx2.AsyncClient) -> None:
    room = platform.info.room_id or ""
    await client.post(room_path(room, "/activity"), json={"working": True})
    (entry,) = [e for e in platform.log() if e.kind == "rest"]
    assert entry.method == "POST"
    assert entry.path == room_path(room, "/activity")
    assert entry.status == 200
    assert entry.body == '{"working":true}'
    assert entry.agent_id == platform.info.agent_id
    assert entry.t > 0


async def test_the_request_log_keeps_the_query_string(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room = platform.info.room_id or ""
    await client.get(room_path(room, "/messages?status=processing&page=1&page_size=50"))
    await client.get(room_path(room, "/messages/next"))
    first, second = [e for e in platform.log() if e.kind == "rest"]
    assert first.path == room_path(room, "/messages")
    assert first.query == "status=processing&page=1&page_size=50"
    assert second.query is None  # no query: none logged


async def test_a_long_query_string_is_cut_like_a_body(platform: Platform) -> None:
    from band_trio.platform import open_platform
    from band_trio.policy import PlatformPolicy

    async with open_platform(seed=True, policy=PlatformPolicy(log_text_limit=64)) as small:
        info = small.info
        async with httpx2.AsyncClient(
            base_url=info.rest_url, headers={"X-API-Key": info.api_key or ""}
        ) as c:
            await c.get(room_path(info.room_id or "", "/messages"), params={"cursor": "9" * 5000})
        (entry,) = [e for e in small.log() if e.kind == "rest"]
    assert entry.query is not None
    assert entry.query.startswith("cursor=999") and entry.query.endswith("[5007 characters]")
    assert len(entry.query) < 100


async def test_keep_processed_makes_processed_terminal_as_a_fault(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    """The stricter rule a test can ask for: a claim of a `processed` message is
    refused 409 `already_processed` and changes nothing (off by default)."""
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    agent = platform.info.agent_id or ""
    message = platform.post_message(room, user, "once")
    mark = room_path(room, f"/messages/{message}")
    await client.post(f"{mark}/processing")
    await client.post(f"{mark}/processed")
    platform.faults.keep_processed()
    late = await client.post(f"{mark}/processing")
    assert_envelope(late, 409, "already_processed")
    assert platform.delivery(message) == {agent: {"status": "processed", "attempts": 1}}
    assert (platform.stats["faults_reopens_refused"], platform.stats["reopened"]) == (1, 0)
    notes = [e.body for e in platform.log() if e.kind == "note"]
    assert notes == ["fault: keep_processed"]
    # a `failed` message still opens a new attempt: only `processed` is kept
    other = platform.post_message(room, user, "twice")
    other_mark = room_path(room, f"/messages/{other}")
    await client.post(f"{other_mark}/processing")
    await client.post(f"{other_mark}/failed", json={"error": "x"})
    assert (await client.post(f"{other_mark}/processing")).json()["data"]["attempt_number"] == 2
    platform.faults.clear()  # back to the documented rule
    assert (await client.post(f"{mark}/processing")).json()["data"]["attempt_number"] == 2
    assert platform.stats["reopened"] == 1


async def test_keep_processed_over_the_admin_api(platform: Platform) -> None:
    async with httpx2.AsyncClient(base_url=platform.info.admin_url) as admin:
        assert (await admin.post("/faults/processed", json={})).json() == {"ok": True}
        assert platform.faults.processed_terminal
        await admin.post("/faults/processed", json={"terminal": False})
        assert not platform.faults.processed_terminal
        bad = await admin.post("/faults/processed", json={"terminal": "yes"})
        assert_envelope(bad, 422, "validation_error")
