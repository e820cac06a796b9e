"""An event stream's connection is the server's to close once the stream ended: a
client that read it to the end (or never read, or left midway) and holds its socket
open holds no fd of the server past the keep-alive deadline (issue 38).

The clients are raw sockets, so the test controls what a hostile client would: when
it reads, whether it reads at all, and that it never closes. What the server still
holds is counted in the kernel's socket table (`support.server_sockets`): the
server runs in this process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from band_trio.policy import ServerPolicy
from band_trio.runs import RunsPolicy
from support import server_sockets

from .conftest import DEADLINE, KEY, Api, Scripted, serve

KEEP_ALIVE = 2.0
"""Long enough that a loaded machine reads each request before the idle timer, which
starts at the connect, can fire (0.5 s closed a connection unread under a full run)."""
MARGIN = 2.0
"""What a close may take past the keep-alive deadline on a loaded machine."""
CLIENTS = 20
POLICY = RunsPolicy(server=ServerPolicy(keep_alive=KEEP_ALIVE))
_END = b"\r\n0\r\n\r\n"
"""The last chunk of a chunked body (after the previous chunk's CRLF)."""


@dataclass
class Reader:
    """One raw HTTP/1.1 client of a run's events, which never closes its socket."""

    stream: trio.SocketStream
    received: bytearray = field(default_factory=bytearray)
    eof: bool = False

    @classmethod
    async def open(cls, port: int, run_id: str) -> Reader:
        host = "127.0.0.1"
        stream = await trio.open_tcp_stream(host, port)
        request = (
            f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {KEY}\r\n\r\n"
        )
        await stream.send_all(request.encode())
        return cls(stream)

    @property
    def port(self) -> int:
        return int(self.stream.socket.getsockname()[1])

    @property
    def head(self) -> bytes:
        return bytes(self.received.partition(b"\r\n\r\n")[0]).lower()

    async def until(self, wanted: bytes) -> None:
        while wanted not in self.received:
            data = await self.stream.receive_some()
            assert data, f"the stream was closed before {wanted!r}: {bytes(self.received)!r}"
            self.received += data

    async def until_head(self) -> None:
        """Read the answer's head (and keep the socket open)."""
        await self.until(b"\r\n\r\n")

    async def until_end(self) -> None:
        """Read the whole response (its last chunk), and keep the socket open."""
        await self.until(_END)

    async def until_closed(self) -> None:
        """Read until the server closes the connection."""
        while data := await self.stream.receive_some():
            self.received += data
        self.eof = True


class Clients:
    """The readers of one test, each holding its socket until the test's end."""

    def __init__(self, api: Api) -> None:
        self.port = int(api.server.url.rsplit(":", 1)[1])
        self.readers: list[Reader] = []

    async def open(self, run_id: str) -> Reader:
        reader = await Reader.open(self.port, run_id)
        self.readers.append(reader)
        return reader


@asynccontextmanager
async def serving(scripted: Scripted) -> AsyncIterator[tuple[Api, Clients]]:
    """The runs API with a short keep-alive, and its clients (closed at the end)."""
    async with serve(scripted, POLICY) as api:
        clients = Clients(api)
        try:
            yield api, clients
        finally:
            for reader in clients.readers:
                await reader.stream.aclose()


async def _all(steps: list[Callable[[], Awaitable[None]]]) -> None:
    """Each of the readers' steps at once, under the test deadline."""
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            for step in steps:
                nursery.start_soon(step)


async def assert_closed_by_the_server(clients: Clients, readers: list[Reader]) -> None:
    """Within the keep-alive deadline and the margin, each reader sees the server close
    its connection, and then the server holds none of their sockets."""
    within = KEEP_ALIVE + MARGIN
    with trio.move_on_after(within):
        await _all([reader.until_closed for reader in readers])
    await trio.testing.wait_all_tasks_blocked()  # the server is done with what it does
    held = server_sockets(clients.port) & {reader.port for reader in readers}
    closed = sum(reader.eof for reader in readers)
    assert not held, (
        f"{len(held)} of {len(readers)} connections still held by the server {within}s "
        f"after their streams ended ({closed} closed)"
    )
    assert closed == len(readers)


async def test_readers_holding_a_finished_stream_open_are_closed(scripted: Scripted) -> None:
    async with serving(scripted) as (api, clients):
        run_id = await api.start("hi")
        await api.settled(run_id)
        readers = [await clients.open(run_id) for _ in range(CLIENTS)]
        await _all([reader.until_end for reader in readers])
        for reader in readers:
            assert b"run.completed" in reader.received
            assert b": stream closed" in reader.received
        await assert_closed_by_the_server(clients, readers)
        assert (await api.client.get("/health")).status_code == 200


async def test_readers_of_a_stream_ended_by_stop_are_closed(scripted: Scripted) -> None:
    async with serving(scripted) as (api, clients):
        run_id = await api.start("wait")
        readers = [await clients.open(run_id) for _ in range(CLIENTS)]
        await _all([reader.until_head for reader in readers])
        assert (await api.stop(run_id, "enough")).status_code == 200
        await _all([reader.until_end for reader in readers])
        assert all(b"run.cancelled" in reader.received for reader in readers)
        await assert_closed_by_the_server(clients, readers)


async def test_the_events_answer_says_the_connection_closes(scripted: Scripted) -> None:
    """The answer says so up front, so a client does not send its next request on a
    connection the server is about to close."""
    async with serving(scripted) as (api, clients):
        run_id = await api.start("hi")
        await api.settled(run_id)
        reader = await clients.open(run_id)
        await _all([reader.until_end])
        assert b"\r\nconnection: close" in reader.head
        await assert_closed_by_the_server(clients, [reader])


async def test_a_client_that_reads_nothing_until_the_end_gets_it_all(scripted: Scripted) -> None:
    """A slow client: the stream ends while it has read nothing. What was sent waits for
    it in the kernel's buffers after the server has closed its side."""
    async with serving(scripted) as (api, clients):
        run_id = await api.start("wait")
        slow = await clients.open(run_id)
        await trio.testing.wait_all_tasks_blocked()  # its stream is open, and waits
        assert api.service.runs[run_id].subscribers == 1
        scripted.release.set()
        await api.settled(run_id)
        await trio.testing.wait_all_tasks_blocked()
        assert not server_sockets(clients.port) & {slow.port}
        await _all([slow.until_closed])
        assert slow.received.endswith(_END)
        assert b"echo: wait" in slow.received
        assert b"run.completed" in slow.received


async def test_a_client_that_never_reads_holds_no_fd_after_the_end(scripted: Scripted) -> None:
    async with serving(scripted) as (api, clients):
        run_id = await api.start("hi")
        await api.settled(run_id)
        silent = [await clients.open(run_id) for _ in range(CLIENTS)]
        await trio.testing.wait_all_tasks_blocked()
        assert not server_sockets(clients.port) & {reader.port for reader in silent}


async def test_a_client_gone_midway_leaves_no_fd_and_the_stream_ends_cleanly(
    scripted: Scripted,
) -> None:
    """One client closes its socket midway, one only half-closes it (it says it sends
    no more, and holds the socket): the server lets go of both at once, the run goes
    on (`on_disconnect` is `continue`), and its end, sent to nobody, fails nothing."""
    async with serving(scripted) as (api, clients):
        run_id = await api.start("wait")
        gone, half = await clients.open(run_id), await clients.open(run_id)
        await _all([gone.until_head, half.until_head])
        gone_port = gone.port
        await gone.stream.aclose()
        await half.stream.send_eof()
        await assert_closed_by_the_server(clients, [half])
        await trio.testing.wait_all_tasks_blocked()
        assert not server_sockets(clients.port) & {gone_port}
        assert api.service.runs[run_id].subscribers == 0
        scripted.release.set()
        await api.settled(run_id)
        assert (await api.status(run_id))["status"] == "completed"
        late = await clients.open(run_id)
        await _all([late.until_end])
        await assert_closed_by_the_server(clients, [late])


async def test_the_last_client_gone_midway_stops_a_cancel_on_disconnect_run(
    scripted: Scripted,
) -> None:
    async with serving(scripted) as (api, clients):
        run_id = await api.start("wait", on_disconnect="cancel")
        half = await clients.open(run_id)
        await _all([half.until_head])
        await half.stream.send_eof()
        await assert_closed_by_the_server(clients, [half])
        await api.settled(run_id)
        status: dict[str, Any] = await api.status(run_id)
        assert status["cancel_reason"] == "the client disconnected"
