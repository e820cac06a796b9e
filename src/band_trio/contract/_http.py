"""A streaming HTTP request whose response the turn's cancel closes.

An OpenAI-style stream has no cancel call: the client stops it by closing the
response, and a well-behaved server (uvicorn/Starlette) cancels its generator
when it sees the disconnect. `stream_request` opens the stream as remote work
of the turn, so the close is the turn's remote stop (reported `requested`:
the server's side is not observable from here), sent at most once and only if
the stream had not ended on its own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2

from ..errors import PeerProtocolError
from ._remote import StopAnswer, StopOutcome
from ._turn import Turn

__all__ = ["MAX_EVENT_BYTES", "ServerSentEvent", "server_sent_events", "stream_request"]


@asynccontextmanager
async def stream_request(
    turn: Turn,
    client: httpx2.AsyncClient,
    method: str,
    url: str,
    *,
    name: str = "http stream",
    **options: Any,
) -> AsyncIterator[httpx2.Response]:
    """`client.stream(method, url, **options)`, closed by the turn's abort.

    Leaving the block normally means the stream is done; leaving it by a cancel or
    an error closes the response (the connection is dropped, not returned to the
    pool half-read). The request itself is not shielded: a cancel before the
    response's headers closes the connection, which stops the server as well
    (recorded as a `requested` stop)."""

    async def stop(response: httpx2.Response) -> StopAnswer:
        await response.aclose()
        return StopOutcome.REQUESTED, "response closed"

    async with (
        turn.remote(stop=stop, name=name, closes_on_cancel=True) as work,
        client.stream(method, url, **options) as response,
    ):
        work.started(response)
        yield response


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One server-sent event: its `event:` name (`"message"` if none) and its data."""

    event: str
    data: str


MAX_EVENT_BYTES = 1024 * 1024
"""The largest server-sent event `server_sent_events` accepts (its lines together)."""


async def server_sent_events(
    response: httpx2.Response, *, max_event: int = MAX_EVENT_BYTES
) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of a `text/event-stream` response, as they arrive.

    An async generator: a caller that stops early closes it (`contextlib.aclosing`).
    Comment lines (`: keepalive`) are skipped; multi-line `data:` is joined with
    newlines; an event is dispatched at its blank line (and at EOF, if the stream
    ends without one). Memory stays bounded: an event (or a line with no end) over
    `max_event` bytes raises `PeerProtocolError`, whatever the peer sends."""
    name = ""
    data: list[str] = []
    size = 0
    lines = _lines(response, max_event)
    async with aclosing(lines):
        async for line in lines:
            if not line:
                if data:
                    yield ServerSentEvent(name or "message", "\n".join(data))
                name, data, size = "", [], 0
                continue
            size += len(line)
            if size > max_event:
                raise PeerProtocolError(f"a server-sent event over {max_event} bytes")
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                data.append(value)
            elif field == "event":
                name = value
    if data:
        yield ServerSentEvent(name or "message", "\n".join(data))


async def _lines(response: httpx2.Response, limit: int) -> AsyncGenerator[str, None]:
    """The body's lines (`\n`, `\r\n` or `\r` ended), none longer than `limit` bytes."""
    pending = b""
    chunks = response.aiter_bytes()
    async with aclosing(chunks):
        async for chunk in chunks:
            pending += chunk
            held = b"\r" if pending.endswith(b"\r") else b""  # maybe half of a \r\n
            if held:
                pending = pending[:-1]
            *complete, pending = pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            pending += held
            if len(pending) > limit:
                raise PeerProtocolError(f"a line of a server-sent event stream over {limit} bytes")
            for line in complete:
                yield line.decode("utf-8", "replace")
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", "replace")
