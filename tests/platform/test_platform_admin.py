"""The admin API under `/_admin`, over real loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
import trio
from platform_client import DEADLINE, join, recv_event, ws_connect

from band_trio.platform import Platform


@pytest.fixture
async def admin(platform: Platform) -> AsyncIterator[httpx2.AsyncClient]:
    json_body = {"content-type": "application/json"}  # the admin API takes JSON only
    async with httpx2.AsyncClient(base_url=platform.info.admin_url, headers=json_body) as c:
        yield c


async def test_create_agent_user_room(platform: Platform, admin: httpx2.AsyncClient) -> None:
    agent = await admin.post("/agents", json={"name": "Bot", "handle": "bot"})
    assert agent.status_code == 201
    body = agent.json()
    assert body["name"] == "Bot"
    assert body["handle"] == "bot"
    assert body["description"]
    assert body["id"] in platform.store.agents
    chosen = await admin.post("/agents", json={"id": "fixed-id", "api_key": "fixed-key"})
    assert (chosen.json()["id"], chosen.json()["api_key"]) == ("fixed-id", "fixed-key")
    duplicate = await admin.post("/agents", json={"id": "fixed-id"})
    assert duplicate.status_code == 422

    user = (await admin.post("/users", json={"name": "Carol"})).json()
    assert user["name"] == "Carol"
    assert user["handle"]
    room = await admin.post("/rooms", json={"title": "t", "participants": [user["id"], body["id"]]})
    assert room.status_code == 201
    assert room.json()["participants"] == [user["id"], body["id"]]
    assert (await admin.get(f"/rooms/{room.json()['id']}")).json()["title"] == "t"
    unknown = await admin.post("/rooms", json={"participants": ["ghost"]})
    assert unknown.status_code == 404


async def test_a_body_with_unknown_fields_is_refused(
    platform: Platform, admin: httpx2.AsyncClient
) -> None:
    """A body meant for something else (a bridge's envelope) or a misspelt field is 422,
    never a request with every optional field left out: nothing is created."""
    agents = len(platform.store.agents)
    envelope = {"event_type": "message_created", "agent_id": "a", "payload": {}}
    for path in ("/agents", "/users", "/rooms"):
        refused = await admin.post(path, json=envelope)
        assert refused.status_code == 422, path
        assert "unknown field `event_type`" in refused.json()["error"]["message"]
    typo = await admin.post("/agents", json={"nmae": "Bot"})
    assert typo.status_code == 422
    agent = platform.info.agent_id
    control = await admin.post("/control", json={"agent_id": agent, "mode": "stop", "why": "x"})
    assert control.status_code == 422
    assert len(platform.store.agents) == agents


async def test_post_and_list_messages(platform: Platform, admin: httpx2.AsyncClient) -> None:
    room, user, agent = platform.info.room_id, platform.info.user_id, platform.info.agent_id
    other = platform.create_agent().id or ""
    platform.add_participant(room or "", other)

    everyone = await admin.post(
        f"/rooms/{room}/messages", json={"sender_id": user, "content": "hi all"}
    )
    assert everyone.status_code == 201
    all_id = everyone.json()["id"]
    mentioned = await admin.post(
        f"/rooms/{room}/messages", json={"sender_id": user, "content": "hi", "mentions": [other]}
    )
    one_id = mentioned.json()["id"]

    listed = (await admin.get(f"/rooms/{room}/messages")).json()
    assert [m["id"] for m in listed] == [all_id, one_id]
    assert listed[0]["sender_id"] == user
    assert listed[0]["sender_type"] == "User"
    assert listed[0]["message_type"] == "text"
    assert listed[0]["inserted_at"].endswith("Z")

    delivery = (await admin.get(f"/messages/{all_id}")).json()
    assert delivery == {
        "id": all_id,
        "room_id": room,
        "delivery": {
            agent: {"status": "delivered", "attempts": 0},
            other: {"status": "delivered", "attempts": 0},
        },
    }
    only = (await admin.get(f"/messages/{one_id}")).json()["delivery"]
    assert only == {other: {"status": "delivered", "attempts": 0}}

    assert (await admin.get("/messages/nope")).status_code == 404
    outsider = platform.create_user().id
    not_member = await admin.post(
        f"/rooms/{room}/messages", json={"sender_id": outsider, "content": "x"}
    )
    assert not_member.status_code == 404
    assert (await admin.post(f"/rooms/{room}/messages", content=b"{")).status_code == 400
    assert (await admin.post(f"/rooms/{room}/messages", json={"content": "x"})).status_code == 422


async def test_control_through_admin(platform: Platform, admin: httpx2.AsyncClient) -> None:
    agent, room = platform.info.agent_id, platform.info.room_id
    async with ws_connect(platform) as ws:
        await join(ws, "1", f"agent_control:{agent}")
        body = {"agent_id": agent, "mode": "stop", "room_id": room, "reason": "user_requested"}
        accepted = (await admin.post("/control", json=body)).json()
        frame = await recv_event(ws, "agent.control")
        assert frame[4]["correlation_id"] == accepted["correlation_id"]
        assert platform.store.is_stopped(agent or "", room or "")
        assert accepted["connected"] is True
    await platform.wait_until(lambda: agent not in platform.connected_agents())
    offline = (await admin.post("/control", json=body)).json()  # no socket now
    assert offline["connected"] is False and platform.store.is_stopped(agent or "", room or "")
    bad_mode = await admin.post("/control", json={"agent_id": agent, "mode": "pause"})
    assert bad_mode.status_code == 422
    ghost = await admin.post("/control", json={"agent_id": "ghost", "mode": "stop"})
    assert ghost.status_code == 404


async def test_participants_and_room_deletion(
    platform: Platform, admin: httpx2.AsyncClient
) -> None:
    room, agent = platform.info.room_id, platform.info.agent_id
    newcomer = platform.create_user().id
    added = await admin.post(f"/rooms/{room}/participants", json={"id": newcomer})
    assert added.json()["participants"][-1] == newcomer
    async with ws_connect(platform) as ws:
        await join(ws, "2", f"room_participants:{room}")
        removed = await admin.delete(f"/rooms/{room}/participants/{newcomer}")
        assert newcomer not in removed.json()["participants"]
        assert (await recv_event(ws, "participant_removed"))[4]["id"] == newcomer
        assert (await admin.delete(f"/rooms/{room}")).json() == {"id": room}
        assert (await recv_event(ws, "room_deleted"))[4] == {"id": room}
    assert (await admin.get(f"/rooms/{room}")).status_code == 404
    assert (await admin.delete(f"/rooms/{room}")).status_code == 404
    assert platform.store.rooms_of(agent or "") == []


async def test_log_and_stats(platform: Platform, admin: httpx2.AsyncClient) -> None:
    first = (await admin.get("/log")).json()
    assert first["next"] == len(first["entries"])
    await admin.get("/stats")
    later = (await admin.get("/log", params={"since": first["next"]})).json()
    kinds = [(e["kind"], e["method"], e["path"]) for e in later["entries"]]
    assert kinds == [("rest", "GET", "/_admin/log"), ("rest", "GET", "/_admin/stats")]
    assert all(isinstance(e["t"], float) for e in later["entries"])
    assert [e["seq"] for e in later["entries"]] == [first["next"], first["next"] + 1]
    stats = (await admin.get("/stats")).json()
    assert stats["requests"] >= 4
    assert stats["connections_live"] == 0
    assert (await admin.get("/nowhere")).status_code == 404
    assert (await admin.get("/nowhere")).json()["error"]["code"] == "not_found"
    assert (await admin.get("/info")).json()["agent_id"] == platform.info.agent_id


async def test_wait_until_sees_rest_effects(platform: Platform, admin: httpx2.AsyncClient) -> None:
    room, user = platform.info.room_id, platform.info.user_id
    seen: list[str] = []

    async def poster() -> None:
        response = await admin.post(
            f"/rooms/{room}/messages", json={"sender_id": user, "content": "x"}
        )
        seen.append(response.json()["id"])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poster)
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: len(platform.messages(room or "")) == 1)
    assert [m.id for m in platform.messages(room or "")] == seen
