"""The Phoenix V2 websocket over real loopback (docs/reference/platform.md)."""

from __future__ import annotations

import json

import msgspec
import pytest
import trio
from platform_client import DEADLINE, join, recv, recv_event, send, ws_connect, ws_refused
from trio_websocket import ConnectionClosed, ConnectionRejected

from band_trio import wire
from band_trio.platform import Platform


def rejection(exc: ConnectionRejected) -> dict[str, str]:
    error: dict[str, str] = json.loads(exc.body or b"{}")["error"]
    return error


async def test_upgrade_without_or_with_wrong_key_is_401(platform: Platform) -> None:
    for key in ("", "wrong"):
        refused = await ws_refused(platform, key=key)
        assert refused.status_code == 401
        error = rejection(refused)
        assert error["code"] == "unauthorized"
        assert isinstance(error["request_id"], str)
    assert platform.stats["upgrades_refused"] == 2
    assert platform.connected_agents() == set()


async def test_legacy_api_key_query_parameter(platform: Platform) -> None:
    async with ws_connect(platform, key="", query=f"&api_key={platform.info.api_key}"):
        assert platform.connected_agents() == {platform.info.agent_id}


async def test_agent_id_mismatch_is_403(platform: Platform) -> None:
    refused = await ws_refused(platform, agent_id="someone-else")
    assert refused.status_code == 403
    assert rejection(refused)["code"] == "forbidden"


async def test_heartbeat_is_answered(platform: Platform) -> None:
    async with ws_connect(platform) as ws:
        await send(ws, None, "9", "phoenix", "heartbeat", {})
        assert await recv(ws) == [
            None,
            "9",
            "phoenix",
            "phx_reply",
            {"status": "ok", "response": {}},
        ]


async def test_join_authorization(platform: Platform) -> None:
    me, room = platform.info.agent_id, platform.info.room_id
    other = platform.create_agent().id
    foreign_room = platform.create_room("theirs", [other or ""]).id
    async with ws_connect(platform) as ws:
        for ref, topic in enumerate(
            [
                f"agent_control:{me}",
                f"agent_rooms:{me}",
                f"agent_contacts:{me}",
                f"chat_room:{room}",
                f"room_participants:{room}",
            ],
            start=1,
        ):
            assert await join(ws, str(ref), topic) == {"status": "ok", "response": {}}
        for ref, topic in [
            ("10", f"agent_control:{other}"),
            ("11", f"chat_room:{foreign_room}"),
            ("12", f"room_participants:{foreign_room}"),
            ("13", "chat_room:no-such-room"),
        ]:
            reply = await join(ws, ref, topic)
            assert reply == {"status": "error", "response": {"reason": "unauthorized"}}
        reply = await join(ws, "14", "mystery:topic")
        assert reply["status"] == "error"
        assert reply["response"]["reason"] == "invalid topic"
        await send(ws, "4", "15", f"chat_room:{room}", "phx_leave", {})
        leave = await recv(ws)
        assert leave == [
            "4",
            "15",
            f"chat_room:{room}",
            "phx_reply",
            {"status": "ok", "response": {}},
        ]
    assert platform.stats["joins_refused"] == 5


async def test_pushes_carry_the_current_join_ref(platform: Platform) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    topic = f"chat_room:{room}"
    async with ws_connect(platform) as ws:
        await join(ws, "7", topic)
        first = platform.post_message(room, user, "one")
        frame = await recv_event(ws, "message_created")
        assert frame[:3] == ["7", None, topic]
        payload = wire.decode_payload("message_created", msgspec.json.encode(frame[4]))
        assert payload.id == first
        assert payload.chat_room_id == room
        assert payload.sender_type == "User"
        assert "thread_id" not in frame[4]  # never null where the SDK rejects null

        # A rejoin on the same connection gets a new join_ref; pushes follow it.
        await send(ws, "7", "8", topic, "phx_leave", {})
        await recv(ws)
        platform.post_message(room, user, "while away")  # not joined: no push
        await join(ws, "9", topic)
        platform.post_message(room, user, "two")
        frame = await recv_event(ws, "message_created")
        assert frame[0] == "9"
        assert frame[4]["content"] == "two"
    assert platform.stats["pushes_unjoined"] >= 1


async def test_only_recipients_get_message_created(platform: Platform) -> None:
    room, user, me = (
        platform.info.room_id or "",
        platform.info.user_id or "",
        platform.info.agent_id,
    )
    bystander = platform.create_agent()
    platform.add_participant(room, bystander.id or "")
    async with (
        ws_connect(platform) as ws,
        ws_connect(platform, key=bystander.api_key, agent_id=bystander.id) as other,
    ):
        await join(ws, "1", f"chat_room:{room}")
        await join(other, "1", f"chat_room:{room}")
        platform.post_message(room, user, "only for me", mentions=[me or ""])
        frame = await recv_event(ws, "message_created")
        assert frame[4]["content"] == "only for me"
        assert frame[4]["metadata"]["mentions"][0]["id"] == me
        # The bystander got nothing: its next frame is the heartbeat reply.
        await send(other, None, "2", "phoenix", "heartbeat", {})
        assert (await recv(other))[1] == "2"


async def test_agent_post_is_echoed_to_the_sender(
    platform: Platform,
) -> None:
    import httpx2

    room, user = platform.info.room_id or "", platform.info.user_id or ""
    async with (
        ws_connect(platform) as ws,
        httpx2.AsyncClient(
            base_url=platform.info.rest_url, headers={"X-API-Key": platform.info.api_key or ""}
        ) as client,
    ):
        await join(ws, "3", f"chat_room:{room}")
        body = {"message": {"content": "reply", "mentions": [{"id": user, "handle": "alice"}]}}
        posted = await client.post(f"/api/v1/agent/chats/{room}/messages", json=body)
        echo = await recv_event(ws, "message_created")
        assert echo[4]["id"] == posted.json()["data"]["id"]
        assert (echo[4]["sender_id"], echo[4]["sender_type"]) == (platform.info.agent_id, "Agent")


async def test_malformed_frames_are_counted_and_survived(platform: Platform) -> None:
    async with ws_connect(platform) as ws:
        for junk in ["not json", "[1, 2]", '["1", "1", "", "phx_join", {}]', "{}"]:
            await ws.send_message(junk)
        await ws.send_message(b"\x00binary")
        await send(ws, None, "5", "phoenix", "heartbeat", {})
        assert (await recv(ws))[1] == "5"
    assert platform.stats["bad_frames"] == 5
    assert platform.stats.get("frame_errors", 0) == 0


async def test_supersede_then_close(platform: Platform) -> None:
    me = platform.info.agent_id
    async with ws_connect(platform) as old:
        await join(old, "1", f"agent_control:{me}")
        old_socket = next(iter(platform.hub.connections)).socket_id
        async with ws_connect(platform) as new:
            frame = await recv_event(old, "supersede")
            assert frame[:3] == ["1", None, f"agent_control:{me}"]
            payload = wire.decode_payload("supersede", msgspec.json.encode(frame[4]))
            assert payload.reason == "superseded"
            assert payload.retryable is False
            assert payload.target_socket_id == old_socket
            assert isinstance(payload.correlation_id, str)
            with pytest.raises(ConnectionClosed) as closed, trio.fail_after(DEADLINE):
                await old.get_message()
            assert closed.value.reason.code == 1000
            with trio.fail_after(DEADLINE):
                await platform.wait_until(lambda: len(platform.hub.connections) == 1)
            assert platform.connected_agents() == {me}
            await send(new, None, "2", "phoenix", "heartbeat", {})
            assert (await recv(new))[1] == "2"


async def test_on_conflict_reject_is_409(platform: Platform) -> None:
    async with ws_connect(platform):
        refused = await ws_refused(platform, query="&on_conflict=reject")
        assert refused.status_code == 409
        assert rejection(refused)["code"] == "connection_conflict"
    # With no live socket, on_conflict=reject connects normally.
    with trio.fail_after(DEADLINE):
        await platform.wait_until(lambda: not platform.connected_agents())
    async with ws_connect(platform, query="&on_conflict=reject"):
        assert platform.connected_agents() == {platform.info.agent_id}


async def test_control_pushes(platform: Platform) -> None:
    me, room = platform.info.agent_id or "", platform.info.room_id or ""
    async with ws_connect(platform) as ws:
        await join(ws, "1", f"agent_control:{me}")
        correlation = platform.send_control(me, "stop", room_id=room, reason="user_requested")
        frame = await recv_event(ws, "agent.control")
        assert frame[:3] == ["1", None, f"agent_control:{me}"]
        stop = frame[4]
        assert stop["type"] == "agent.control"
        assert (stop["mode"], stop["scope"], stop["room_id"]) == ("stop", "room", room)
        assert (stop["agent_id"], stop["reason"], stop["correlation_id"]) == (
            me,
            "user_requested",
            correlation,
        )
        assert wire.decode_payload("agent.control", msgspec.json.encode(stop)).mode == "stop"

        platform.send_control(me, "play", room_id=room)
        play = (await recv_event(ws, "agent.control"))[4]
        assert play["execution_id"] == stop["execution_id"]  # stable per (agent, room)
        assert play["correlation_id"] != correlation
        assert "reason" not in play

        platform.send_control(me, "interrupt")
        agent_wide = (await recv_event(ws, "agent.control"))[4]
        assert agent_wide["scope"] == "agent"
        assert "room_id" in agent_wide
        assert agent_wide["room_id"] is None
        assert isinstance(agent_wide["execution_id"], str)


async def test_room_membership_pushes(platform: Platform) -> None:
    me, room, user = (
        platform.info.agent_id or "",
        platform.info.room_id or "",
        platform.info.user_id,
    )
    newcomer = platform.create_agent(name="New", handle="new")
    new_id = newcomer.id or ""
    async with (
        ws_connect(platform) as ws,
        ws_connect(platform, key=newcomer.api_key, agent_id=new_id) as nws,
    ):
        await join(ws, "4", f"room_participants:{room}")
        await join(nws, "2", f"agent_rooms:{new_id}")

        platform.add_participant(room, new_id)
        added = await recv_event(ws, "participant_added")
        assert added[0] == "4"
        assert added[4] == {"id": new_id, "type": "Agent", "name": "New", "handle": "new"}
        room_added = await recv_event(nws, "room_added")
        assert room_added[0] == "2"
        assert wire.decode_payload("room_added", msgspec.json.encode(room_added[4])).id == room

        platform.remove_participant(room, user or "")
        removed = await recv_event(ws, "participant_removed")
        assert removed[4]["id"] == user
        assert removed[4]["type"] == "User"

        platform.remove_participant(room, new_id)
        assert (await recv_event(ws, "participant_removed"))[4]["id"] == new_id
        assert (await recv_event(nws, "room_removed"))[4]["id"] == room

        platform.delete_room(room)
        assert await recv_event(ws, "room_deleted") == [
            "4", None, f"room_participants:{room}", "room_deleted", {"id": room}
        ]  # fmt: skip
    assert me in platform.store.agents


async def test_ws_frames_are_logged(platform: Platform) -> None:
    me = platform.info.agent_id
    async with ws_connect(platform) as ws:
        await join(ws, "1", f"agent_control:{me}")
    with trio.fail_after(DEADLINE):
        await platform.wait_until(lambda: any(e.kind == "ws_close" for e in platform.log()))
    kinds = [e.kind for e in platform.log()]
    assert kinds == ["ws_open", "ws_in", "ws_out", "ws_close"]
    ws_in, ws_out = platform.log()[1:3]
    assert ws_in.frame == f'["1","1","agent_control:{me}","phx_join",{{}}]'
    assert ws_out.frame is not None
    assert json.loads(ws_out.frame)[3] == "phx_reply"
    assert ws_in.t <= ws_out.t


async def test_wait_until_wakes_on_connect(platform: Platform) -> None:
    async with trio.open_nursery() as nursery:

        async def connect() -> None:
            async with ws_connect(platform):
                await trio.sleep_forever()

        nursery.start_soon(connect)
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: platform.connected_agents() != set())
        nursery.cancel_scope.cancel()
