"""The websocket link against a scripted trio-websocket server on loopback.

The server is real (a socket, a handshake, frames on the wire); what it sends
is scripted, so malformed and stale frames can be produced on purpose.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import msgspec
import pytest
import trio
import trio_websocket

from band_trio import Policy, errors, wire
from band_trio.link import Socket, SocketStats, run_socket
from support import client_sockets

Script = Callable[[trio_websocket.WebSocketConnection], Awaitable[None]]


async def answer_joins(ws: trio_websocket.WebSocketConnection, count: int) -> list[str]:
    """Reply ok to `count` joins; returns their join refs."""
    refs = []
    for _ in range(count):
        join_ref, ref, topic, event, _ = msgspec.json.decode(await ws.get_message())
        assert event == "phx_join"
        refs.append(join_ref)
        await ws.send_message(
            wire.encode_frame(join_ref, ref, topic, "phx_reply", {"status": "ok", "response": {}})
        )
    return refs


@asynccontextmanager
async def scripted_server(script: Script) -> AsyncIterator[str]:
    async def handler(request: trio_websocket.WebSocketRequest) -> None:
        ws = await request.accept()
        try:
            await script(ws)
            await trio.sleep_forever()
        except trio_websocket.ConnectionClosed:
            pass

    async with trio.open_nursery() as nursery:
        server = await nursery.start(
            functools.partial(
                trio_websocket.serve_websocket, handler, "127.0.0.1", 0, ssl_context=None
            )
        )
        yield f"ws://127.0.0.1:{server.port}/socket"
        nursery.cancel_scope.cancel()


async def connect(
    url: str,
    pushes: list[tuple[str, str, object]],
    stats: SocketStats,
    policy: Policy,
    nursery: trio.Nursery,
) -> Socket:
    socket: Socket = await nursery.start(
        functools.partial(
            run_socket,
            url,
            agent_id="A",
            api_key="key",
            on_push=lambda topic, event, payload: pushes.append((topic, event, payload)),
            refs=wire.RefCounter(),
            stats=stats,
            policy=policy,
        )
    )
    return socket


def message(id: str) -> dict[str, object]:
    return {
        "id": id,
        "content": "hi",
        "message_type": "text",
        "sender_type": "User",
        "sender_id": "U",
        "inserted_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
    }


async def test_bad_frames_are_counted_and_dropped_and_the_connection_lives() -> None:
    async def script(ws: trio_websocket.WebSocketConnection) -> None:
        (join_ref,) = await answer_joins(ws, 1)
        await ws.send_message("this is not json")
        await ws.send_message('["1", null, "chat_room:R"]')
        await ws.send_message(
            wire.encode_frame(
                join_ref, None, "chat_room:R", "message_created", {"id": "no-content"}
            )
        )
        await ws.send_message(
            wire.encode_frame("999", None, "chat_room:R", "message_created", message("stale"))
        )
        await ws.send_message(
            wire.encode_frame(join_ref, None, "chat_room:R", "message_created", message("good"))
        )

    pushes: list[tuple[str, str, object]] = []
    stats = SocketStats()
    with trio.fail_after(5):
        async with scripted_server(script) as url, trio.open_nursery() as nursery:
            socket = await connect(url, pushes, stats, Policy(), nursery)
            await socket.join("chat_room:R")
            while not pushes:
                await trio.testing.wait_all_tasks_blocked()
            await socket.aclose()
    assert [(topic, event) for topic, event, _ in pushes] == [("chat_room:R", "message_created")]
    payload = pushes[0][2]
    assert isinstance(payload, wire.MessageCreated) and payload.id == "good"
    assert stats.bad_frames == 2
    assert stats.bad_payloads["message_created"] == 1
    assert stats.stale_pushes == 1


async def test_a_refused_join_raises_join_error_with_the_reason() -> None:
    async def script(ws: trio_websocket.WebSocketConnection) -> None:
        join_ref, ref, topic, _, _ = msgspec.json.decode(await ws.get_message())
        await ws.send_message(
            wire.encode_frame(
                join_ref,
                ref,
                topic,
                "phx_reply",
                {"status": "error", "response": {"reason": "unauthorized"}},
            )
        )

    with trio.fail_after(5):
        async with scripted_server(script) as url, trio.open_nursery() as nursery:
            socket = await connect(url, [], SocketStats(), Policy(), nursery)
            with pytest.raises(errors.JoinError, match="unauthorized"):
                await socket.join("chat_room:R")
            await socket.aclose()


async def test_an_unanswered_join_fails_at_the_policy_deadline(autojump_clock: object) -> None:
    async def script(ws: trio_websocket.WebSocketConnection) -> None:
        await ws.get_message()  # swallow the join, never answer

    with trio.fail_after(60):
        async with scripted_server(script) as url, trio.open_nursery() as nursery:
            socket = await connect(url, [], SocketStats(), Policy(join_deadline=3), nursery)
            started = trio.current_time()
            with pytest.raises(errors.JoinError, match="no reply"):
                await socket.join("agent_control:A")
            assert trio.current_time() - started == pytest.approx(3, abs=0.1)
            await socket.aclose()


async def test_unanswered_heartbeats_close_the_socket_with_4000() -> None:
    heartbeats: list[str] = []
    server_saw: list[int] = []
    seen_close = trio.Event()

    async def script(ws: trio_websocket.WebSocketConnection) -> None:
        try:
            while True:
                frame = msgspec.json.decode(await ws.get_message())
                if frame[3] == "heartbeat":
                    heartbeats.append(frame[1])
        except trio_websocket.ConnectionClosed as exc:
            server_saw.append(exc.reason.code if exc.reason else -1)
            seen_close.set()
            raise

    # 50 heartbeats' room before the socket gives up: a loaded machine that stalls the
    # run for a tenth of a second (0.1 s had sent one heartbeat at a load of 6) still
    # shows them repeating.
    policy = Policy(heartbeat_interval=0.02, heartbeat_dead_after=1.0)
    with trio.fail_after(10):
        async with scripted_server(script) as url, trio.open_nursery() as nursery:
            socket = await connect(url, [], SocketStats(), policy, nursery)
            await socket.closed.wait()
            await seen_close.wait()
    assert socket.close_code == 4000
    assert server_saw == [4000]
    assert len(heartbeats) >= 2  # they repeat while unanswered


async def test_answered_heartbeats_keep_the_socket_open() -> None:
    async def script(ws: trio_websocket.WebSocketConnection) -> None:
        while True:
            _, ref, _, event, _ = msgspec.json.decode(await ws.get_message())
            if event == "heartbeat":
                answered.append(ref)
                if len(answered) == 20:  # 1 s: twice the dead threshold
                    enough.set()
                await ws.send_message(
                    wire.encode_frame(
                        None, ref, "phoenix", "phx_reply", {"status": "ok", "response": {}}
                    )
                )

    answered: list[str] = []
    enough = trio.Event()
    # A reply resets the dead timer: twenty answered beats span twice `dead_after`, which
    # is long enough (0.5 s) that a loaded machine's stall does not pass for a dead peer.
    policy = Policy(heartbeat_interval=0.05, heartbeat_dead_after=0.5)
    with trio.fail_after(10):
        async with scripted_server(script) as url, trio.open_nursery() as nursery:
            socket = await connect(url, [], SocketStats(), policy, nursery)
            await enough.wait()
            assert not socket.closed.is_set()
            await socket.aclose()


async def silent_listener(nursery: trio.Nursery) -> int:
    """A TCP server that accepts and reads, but never answers the websocket upgrade."""

    async def swallow(stream: trio.SocketStream) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await stream.receive_some():
                pass

    listeners = await nursery.start(functools.partial(trio.serve_tcp, swallow, 0, host="127.0.0.1"))
    return int(listeners[0].socket.getsockname()[1])


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs /proc/net/tcp")
async def test_a_cancelled_handshake_leaves_no_socket_open() -> None:
    with trio.fail_after(5):
        async with trio.open_nursery() as servers:
            port = await silent_listener(servers)
            with trio.move_on_after(0.2) as waited:
                async with trio.open_nursery() as nursery:
                    await connect(
                        f"ws://127.0.0.1:{port}/socket", [], SocketStats(), Policy(), nursery
                    )
            assert waited.cancelled_caught
            assert client_sockets(port) == 0
            servers.cancel_scope.cancel()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs /proc/net/tcp")
async def test_a_handshake_that_never_finishes_fails_at_the_connect_deadline(
    autojump_clock: object,
) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as servers:
            port = await silent_listener(servers)
            started = trio.current_time()
            async with trio.open_nursery() as nursery:
                with pytest.raises(errors.PlatformUnavailableError, match="handshake"):
                    await connect(
                        f"ws://127.0.0.1:{port}/socket",
                        [],
                        SocketStats(),
                        Policy(connect_deadline=4),
                        nursery,
                    )
            assert trio.current_time() - started == pytest.approx(4, abs=0.1)  # not 60 s
            assert client_sockets(port) == 0
            servers.cancel_scope.cancel()


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs /proc/net/tcp")
async def test_cancelled_and_server_closed_connections_leave_no_socket_open() -> None:
    async def close_at_once(ws: trio_websocket.WebSocketConnection) -> None:
        await ws.aclose(1000, "server bye")

    with trio.fail_after(5):
        async with scripted_server(answer_nothing) as url:
            port = int(url.split(":")[2].split("/")[0])
            async with trio.open_nursery() as nursery:
                await connect(url, [], SocketStats(), Policy(), nursery)
                assert client_sockets(port) == 1
                nursery.cancel_scope.cancel()  # cancel the connection outright
            assert client_sockets(port) == 0
        async with scripted_server(close_at_once) as url:
            port = int(url.split(":")[2].split("/")[0])
            async with trio.open_nursery() as nursery:
                socket = await connect(url, [], SocketStats(), Policy(), nursery)
                await socket.closed.wait()  # the server closed it
            assert socket.close_code == 1000
            assert client_sockets(port) == 0


async def answer_nothing(ws: trio_websocket.WebSocketConnection) -> None:
    await trio.sleep_forever()


async def mute_after_upgrade(nursery: trio.Nursery) -> int:
    """A server that completes the websocket upgrade, then never answers anything."""

    async def handler(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = await stream.receive_some()
            if not chunk:
                return
            request += chunk
        key = next(
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key:")
        )
        accept = base64.b64encode(
            hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest()
        )
        await stream.send_all(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while await stream.receive_some():
                pass  # swallow the close frame, never answer it

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    return int(listeners[0].socket.getsockname()[1])


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs /proc/net/tcp")
async def test_a_close_the_peer_never_answers_ends_at_the_close_deadline(
    autojump_clock: object,
) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as servers:
            port = await mute_after_upgrade(servers)
            async with trio.open_nursery() as nursery:
                socket = await connect(
                    f"ws://127.0.0.1:{port}/socket",
                    [],
                    SocketStats(),
                    Policy(close_deadline=3),
                    nursery,
                )
                started = trio.current_time()
                await socket.aclose()
                assert trio.current_time() - started == pytest.approx(3, abs=0.1)  # not 60
            assert client_sockets(port) == 0
            servers.cancel_scope.cancel()


async def test_send_many_puts_each_message_on_the_wire_in_order_and_expect_routes_replies() -> None:
    """The joins' batch (`Socket.send_many`, one write for all) is read by a plain
    websocket server as separate, well-formed messages in order; each reply goes to
    the handler `expect`ed for its ref, once, and a forgotten ref's reply nowhere."""
    got: list[str] = []

    async def script(ws: trio_websocket.WebSocketConnection) -> None:
        for _ in range(300):
            join_ref, ref, topic, _, _ = msgspec.json.decode(await ws.get_message())
            got.append(topic)
            reply = {"status": "ok", "response": {}}
            await ws.send_message(wire.encode_frame(join_ref, ref, topic, "phx_reply", reply))

    replies: dict[str, str] = {}
    with trio.fail_after(5):
        async with scripted_server(script) as url, trio.open_nursery() as nursery:
            socket = await connect(url, [], SocketStats(), Policy(), nursery)
            texts, refs = [], []
            for i in range(300):
                ref, text = socket.channels.join_frame(f"chat_room:{i}")
                texts.append(text)
                refs.append(ref)
                if i != 7:  # ref 7's is forgotten below; the others are answered once
                    socket.expect(
                        f"chat_room:{i}", ref, lambda r, i=i: replies.setdefault(str(i), r.status)
                    )
            socket.expect("chat_room:7", refs[7], lambda r: replies.setdefault("7", "late"))
            socket.forget(refs[7])
            await socket.send_many(texts)
            while len(got) < 300 or len(replies) < 299:
                await trio.testing.wait_all_tasks_blocked()
            await socket.aclose()
    assert got == [f"chat_room:{i}" for i in range(300)]
    assert replies == {str(i): "ok" for i in range(300) if i != 7}
    assert socket.stats.frames_out == 300
