"""A socket's outbound queue pushes back on a client that reads, and cuts off one that
does not (issue 38, item 6; docs/reference/platform.md, "Backpressure").

Before, the platform queued its replies without waiting and aborted the socket (1011)
the moment the queue held `PlatformPolicy.outbound_queue` frames: a client that
pipelined more heartbeats than that was cut off however fast it read. Now the
platform stops reading a socket whose queue is full and reads on as it drains; it
aborts only a client that takes nothing for `outbound_stall`, and fan-out (pushes
caused by others) never waits for a socket.

Raw clients, frame by frame: trio-websocket for one that reads, wsproto over a bare
TCP stream for one that never reads (trio-websocket's own reader would keep
reading into its queue).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import wsproto
import wsproto.events as ws_events
from platform_client import recv, recv_event, send, ws_connect

from band_trio.platform import Platform, open_platform
from band_trio.policy import PlatformPolicy

QUEUE = 64
STALL = 0.5
"""Short, so the test of a client that stops reading stays fast; the server seam's own
`send_stall` (10 s) is far longer, so it is this rule that must cut the client off."""


def policy(**changes: float | int) -> PlatformPolicy:
    return PlatformPolicy(outbound_queue=QUEUE, outbound_stall=STALL).replace(**changes)


@asynccontextmanager
async def bare_socket(platform: Platform, key: str, agent_id: str) -> AsyncIterator[Sender]:
    """A websocket that sends and never reads a byte past the handshake."""
    port = int(platform.info.rest_url.rsplit(":", 1)[1])
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        conn = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        target = f"/api/v1/socket/websocket?vsn=2.0.0&agent_id={agent_id}"
        headers = [(b"x-api-key", key.encode())]
        request = ws_events.Request(host=f"127.0.0.1:{port}", target=target, extra_headers=headers)
        await stream.send_all(conn.send(request))
        accepted = False
        with trio.fail_after(5):
            while not accepted:
                conn.receive_data(await stream.receive_some())
                for event in conn.events():
                    assert isinstance(event, ws_events.AcceptConnection), event
                    accepted = True
        yield Sender(stream, conn)
    finally:
        await trio.aclose_forcefully(stream)


class Sender:
    def __init__(self, stream: trio.SocketStream, conn: wsproto.WSConnection) -> None:
        self.stream = stream
        self.conn = conn
        self.sent = 0

    async def send(self, *frame: object) -> None:
        text = json.dumps(list(frame), separators=(",", ":"))
        await self.stream.send_all(self.conn.send(ws_events.TextMessage(data=text)))
        self.sent += 1


async def test_a_client_that_reads_gets_every_reply_to_far_more_heartbeats_than_the_queue() -> None:
    count = 40 * QUEUE
    async with open_platform(seed=True, policy=policy()) as platform:
        async with ws_connect(platform) as ws:
            got: list[str] = []

            async def pipeline() -> None:
                for n in range(count):
                    await send(ws, None, str(n), "phoenix", "heartbeat", {})

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(pipeline)
                    while len(got) < count:
                        frame = await recv(ws)
                        assert frame[2:4] == ["phoenix", "phx_reply"], frame
                        got.append(frame[1])
            assert got == [str(n) for n in range(count)]
            assert ws.closed is None
            await send(ws, None, "last", "phoenix", "heartbeat", {})
            assert (await recv(ws))[1] == "last"
        stats = platform.stats
        assert stats["sockets_stalled"] == stats["sockets_overflowed"] == 0
        assert stats["socket_backpressure"] > 0  # the queue did fill, and the reads waited


async def test_a_client_that_stops_reading_is_cut_off_within_the_stall_and_others_go_on() -> None:
    """It pipelines heartbeats with 64 KiB refs (each echoed in its reply) and reads none:
    the replies fill the kernel's buffers, the writer stalls, the queue fills, the
    platform stops reading it, and `outbound_stall` later it is aborted. Meanwhile
    another agent's heartbeats and pushes go through, and the post that pushes to both
    never waits."""
    async with open_platform(seed=True, policy=policy()) as platform:
        me, key, room, user = (
            platform.info.agent_id,
            platform.info.api_key,
            platform.info.room_id,
            platform.info.user_id,
        )
        assert me and key and room and user
        other = platform.create_agent(name="other")
        platform.add_participant(room, other.id)
        ref = "r" * 65536
        async with bare_socket(platform, key, me) as stuck, trio.open_nursery() as nursery:
            await stuck.send(room, room, f"chat_room:{room}", "phx_join", {})

            async def flood() -> None:
                for n in range(100_000):
                    await stuck.send(None, f"{n}{ref}", "phoenix", "heartbeat", {})

            nursery.start_soon(flood)
            async with ws_connect(platform, key=other.api_key, agent_id=other.id) as ws:
                await send(ws, "1", "1", f"chat_room:{room}", "phx_join", {})
                assert (await recv(ws))[4]["status"] == "ok"
                with trio.fail_after(STALL + 5):
                    await platform.wait_until(lambda: platform.stats["sockets_stalled"] == 1)
                for n in range(3):  # the other agent is served all along
                    await send(ws, None, f"hb{n}", "phoenix", "heartbeat", {})
                    assert (await recv(ws))[1] == f"hb{n}"
                    platform.post_message(room, user, f"m{n}")
                    assert (await recv_event(ws, "message_created"))[4]["content"] == f"m{n}"
            nursery.cancel_scope.cancel()
        assert me not in platform.connected_agents()
        _, why = platform.hub.last_disconnect[me]
        assert "stopped reading" in why, why
        assert platform.stats["sockets_overflowed"] == 0
        # it sent far fewer than it tried: the platform stopped reading it
        assert stuck.sent < 1000


async def test_fan_out_never_waits_and_a_client_that_falls_that_far_behind_is_aborted() -> None:
    """Pushes caused by others are queued without waiting, past `outbound_queue` up to
    `outbound_overflow` more; one more aborts the socket (it resyncs through `/next`)."""
    async with open_platform(
        seed=True, policy=policy(outbound_queue=4, outbound_overflow=8)
    ) as platform:
        me, key, room, user = (
            platform.info.agent_id,
            platform.info.api_key,
            platform.info.room_id,
            platform.info.user_id,
        )
        assert me and key and room and user
        async with bare_socket(platform, key, me) as stuck:
            await stuck.send(room, room, f"chat_room:{room}", "phx_join", {})
            with trio.fail_after(5):
                await platform.wait_until(lambda: platform.stats["ws_frames_out"] == 1)
            for n in range(4 + 8 + 1):  # no await: the writer gets no turn in between
                platform.post_message(room, user, f"m{n}")
            with trio.fail_after(5):
                await platform.wait_until(lambda: me not in platform.connected_agents())
        assert platform.stats["sockets_overflowed"] == 1
        _, why = platform.hub.last_disconnect[me]
        assert "fell behind" in why, why
