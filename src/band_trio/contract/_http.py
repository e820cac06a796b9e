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

from ._remote import StopAnswer, StopOutcome
from ._turn import Turn

__all__ = ["ServerSentEvent", "server_sent_events", "stream_request"]


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


async def server_sent_events(
    response: httpx2.Response,
) -> AsyncGenerator[ServerSentEvent, None]:
    """The events of a `text/event-stream` response, as they arrive.

    An async generator: a caller that stops early closes it (`contextlib.aclosing`).
    Comment lines (`: keepalive`) are skipped; multi-line `data:` is joined with
    newlines; an event is dispatched at its blank line (and at EOF, if the stream
    ends without one)."""
    name = ""
    data: list[str] = []
    lines = response.aiter_lines()
    async with aclosing(lines):  # type: ignore[type-var]  # an async generator in fact
        async for line in lines:
            if not line:
                if data:
                    yield ServerSentEvent(name or "message", "\n".join(data))
                name, data = "", []
                continue
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
