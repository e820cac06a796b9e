"""The server seam lets go of a connection its client holds open and idle: after the
keep-alive deadline (`ServerPolicy.keep_alive`), whatever the app did at the end of
its answer (issue 38).

The clients are raw sockets that never close; what the server still holds is
counted in the kernel's socket table (`support.server_sockets`): the server runs in
this process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import trio
import trio.testing

from band_trio.policy import ServerPolicy
from band_trio.server import ServeSettings, serve
from support import server_sockets

DEADLINE = 10.0
KEEP_ALIVE = 1.5
"""Long enough that a loaded machine reads each request before the idle timer, which
starts at the connect, can fire (0.5 s closed a connection unread in a full run)."""
MARGIN = 2.0
"""What a close may take past the keep-alive deadline on a loaded machine."""
CLIENTS = 20
_END = b"\r\n0\r\n\r\n"
"""The last chunk of a chunked body."""


async def plain(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A JSON answer, no watch of the client."""
    body = b'{"status": "ok"}'
    headers = [(b"content-type", b"application/json"), (b"content-length", b"16")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def watched(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A streamed answer whose end is sent while a task watches for the client going
    away and cancels the stream when it does: hypercorn says `http.disconnect` from
    inside that very send (the shape of the runs API's event stream before issue 38)."""
    while (await receive()).get("more_body", False):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})

    async def watch(stream: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        stream.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await send({"type": "http.response.body", "body": b": end\n\n"})
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[int]:
    settings = ServeSettings(grace=1.0, policy=ServerPolicy(keep_alive=KEEP_ALIVE))
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        listening = await nursery.start(partial(serve, app, "127.0.0.1", 0, settings, stop=stop))
        try:
            yield listening.port
        finally:
            stop.set()


class Client:
    """A raw HTTP/1.1 client that asks once, reads the answer and holds on."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.received = b""
        self.closed_at: float | None = None

    @property
    def port(self) -> int:
        return int(self.stream.socket.getsockname()[1])

    async def ask(self, port: int, end: bytes) -> float:
        """Send a GET, read its whole answer (through `end`); when it was read."""
        request = f"GET / HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n"
        await self.stream.send_all(request.encode())
        while not self.received.endswith(end):
            data = await self.stream.receive_some()
            assert data, self.received
            self.received += data
        return trio.current_time()

    async def until_closed(self) -> None:
        while await self.stream.receive_some():
            pass
        self.closed_at = trio.current_time()


@asynccontextmanager
async def clients(port: int, count: int) -> AsyncIterator[list[Client]]:
    opened = [Client(await trio.open_tcp_stream("127.0.0.1", port)) for _ in range(count)]
    try:
        yield opened
    finally:
        for client in opened:
            await client.stream.aclose()


async def closed_by_the_server(port: int, held: list[Client]) -> None:
    """Within the keep-alive and the margin each client sees its connection closed, and
    then the server holds none of their sockets."""
    with trio.move_on_after(KEEP_ALIVE + MARGIN):
        async with trio.open_nursery() as nursery:
            for client in held:
                nursery.start_soon(client.until_closed)
    await trio.testing.wait_all_tasks_blocked()  # the server is done with what it does
    still = server_sockets(port) & {client.port for client in held}
    assert not still, (
        f"{len(still)} of {len(held)} idle connections still held by the server "
        f"{KEEP_ALIVE + MARGIN}s after their answers ended"
    )


async def test_an_idle_keep_alive_connection_is_closed_after_keep_alive() -> None:
    async with serving(plain) as port, clients(port, 1) as (client,):
        with trio.fail_after(DEADLINE):
            answered = await client.ask(port, b'"ok"}')
        assert b"content-length: 16" in client.received
        await closed_by_the_server(port, [client])
        assert client.closed_at is not None
        assert client.closed_at - answered >= KEEP_ALIVE * 0.9


async def test_an_answer_ended_under_a_disconnect_watch_frees_its_connection() -> None:
    async with serving(watched) as port, clients(port, CLIENTS) as held:
        with trio.fail_after(DEADLINE):
            async with trio.open_nursery() as nursery:
                for client in held:
                    nursery.start_soon(client.ask, port, _END)
        await closed_by_the_server(port, held)
        # the connection was recycled, not closed: it went back to waiting for a request
        assert all(b"connection: close" not in client.received.lower() for client in held)
