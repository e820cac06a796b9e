"""The OpenCode adapter's event reader holds at most `UpstreamPolicy.event_buffer` events
for its turn: a turn that reads slower than the server writes holds the reader back, and nothing is
lost (issue 21, item 9). Before, the channel was unbounded (`math.inf`), fed by a
shielded reader: a server flooding the session's events grew memory without limit.

The server here is a plain loopback stream of server-sent events (no OpenCode needed
for this: the reader's buffering is the subject); the adapter's behaviour against the
real `opencode serve` is in test_opencode.py.
"""

from __future__ import annotations

import functools
import json

import httpx2
import trio
import trio.testing

from band_trio.adapters._opencode_events import subscribe
from band_trio.policy import UpstreamPolicy

EVENT_BUFFER = UpstreamPolicy().event_buffer
FLOOD = 4 * EVENT_BUFFER


async def serve_events(stream: trio.SocketStream) -> None:
    """Answer one `GET /event` with `server.connected`, then FLOOD events of session s1."""
    head = b""
    while b"\r\n\r\n" not in head:
        head += await stream.receive_some()
    await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
    frames = [{"type": "server.connected", "properties": {}}] + [
        {"type": "message.part.delta", "properties": {"sessionID": "s1", "n": n}}
        for n in range(FLOOD)
    ]
    for frame in frames:
        await stream.send_all(f"data: {json.dumps(frame)}\n\n".encode())
    await trio.sleep_forever()


async def test_a_flood_of_events_is_held_back_not_buffered_and_nothing_is_lost() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, serve_events, 0, host="127.0.0.1")
            )
            port = listeners[0].socket.getsockname()[1]
            async with (
                httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
                subscribe(client, "s1", {}, UpstreamPolicy()) as events,
            ):
                await trio.testing.wait_all_tasks_blocked()  # the reader waits for the turn
                held = events.send.statistics().current_buffer_used
                assert held <= EVENT_BUFFER
                got = [(await events.next())["properties"]["n"] for _ in range(FLOOD)]
            nursery.cancel_scope.cancel()
    assert held == EVENT_BUFFER  # it filled, and waited there
    assert got == list(range(FLOOD))
