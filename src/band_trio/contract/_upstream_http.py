"""HTTP to an upstream: a stream the turn's cancel closes, and reads with a limit.

An OpenAI-style stream has no cancel call: the client stops it by closing the
response, and a well-behaved server (uvicorn/Starlette) cancels its generator
when it sees the disconnect. `stream_request` opens the stream as remote work
of the turn, so the close is the turn's remote stop (reported `requested`:
the server's side is not observable from here), sent at most once and only if
the stream had not ended on its own.

Nothing a peer sends is held without a bound (`UpstreamPolicy`): `read_body`
reads a body up to `max_body` and `check_status` reads only the head of an
error answer (`max_error_body`); past a limit the response is closed unread,
which drops its connection (httpx2 never returns a half-read one to its pool).
`server_sent_events` bounds each event; `upstream_timeout` gives a client the
policy's connect and read timeouts, so a silent peer is a `ReadTimeout`, and
`upstream_client` builds a client with them and the process's one TLS context
(`band_trio.tls`): an adapter per identity costs no CA bundle of its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2

from ..errors import PeerProtocolError
from ..policy import UpstreamPolicy
from ..retry import retry_after
from ..tls import shared_ssl_context
from ._remote import StopAnswer, StopOutcome
from ._turn import Turn
from ._upstream import UpstreamFault

__all__ = [
    "MAX_EVENT_BYTES",
    "ServerSentEvent",
    "check_status",
    "error_detail",
    "read_body",
    "request_body",
    "server_sent_events",
    "stream_request",
    "upstream_client",
    "upstream_timeout",
]


def upstream_timeout(upstream: UpstreamPolicy) -> httpx2.Timeout:
    """httpx2's timeouts from the policy: connecting (and waiting for a pooled
    connection) `connect_timeout`, every read and write `read_timeout` — so a peer
    silent that long mid-answer raises `httpx2.ReadTimeout`, a stalled attempt."""
    return httpx2.Timeout(
        connect=upstream.connect_timeout,
        read=upstream.read_timeout,
        write=upstream.read_timeout,
        pool=upstream.connect_timeout,
    )


def upstream_client(upstream: UpstreamPolicy, **options: Any) -> httpx2.AsyncClient:
    """An `httpx2.AsyncClient` for an upstream: the policy's timeouts
    (`upstream_timeout`), the shared TLS context, and `options` (headers, base_url,
    auth...). The caller owns it (`aclose`, or `async with`)."""
    return httpx2.AsyncClient(
        timeout=upstream_timeout(upstream), verify=shared_ssl_context(), **options
    )


async def read_body(response: httpx2.Response, limit: int, *, what: str = "the answer") -> bytes:
    """The response's body, at most `limit` bytes: a longer one (announced by its
    `content-length`, or found while reading) raises `PeerProtocolError` without
    reading on; leaving the response's block then drops the connection."""
    announced = response.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > limit:
        raise PeerProtocolError(f"{what} is {announced} bytes, over the {limit}-byte limit")
    body = bytearray()
    chunks = response.aiter_bytes()
    async with aclosing(chunks):
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                raise PeerProtocolError(f"{what} ran past the {limit}-byte limit")
    return bytes(body)


async def _head(response: httpx2.Response, limit: int) -> bytes:
    """At most `limit` bytes of the body's start (the rest is not read)."""
    head = bytearray()
    chunks = response.aiter_bytes()
    async with aclosing(chunks):
        async for chunk in chunks:
            head += chunk
            if len(head) >= limit:
                break
    return bytes(head[:limit])


def error_detail(head: bytes) -> str:
    """What an error answer says: its JSON `error.message` (OpenAI's shape), `error` or
    `message`, else its text; a few hundred characters at most."""
    text = head.decode("utf-8", "replace").strip()
    try:
        found = json.loads(text)
    except ValueError:
        return text[:300]
    if isinstance(found, dict):
        error = found.get("error", found.get("message"))
        if isinstance(error, dict):
            error = error.get("message") or error
        if error is not None:
            return str(error)[:300]
    return text[:300]


async def check_status(response: httpx2.Response, upstream: UpstreamPolicy) -> None:
    """An error answer (status >= 400) raises `UpstreamFault` with its status, the wait
    its headers ask for (`Retry-After`, `retry-after-ms`) and what it says (read up to
    `max_error_body`; the rest is left unread)."""
    if response.status_code < 400:
        return
    detail = error_detail(await _head(response, upstream.max_error_body))
    wait = retry_after(response.headers)
    raise UpstreamFault.status(response.status_code, retry_after=wait, detail=detail)


async def request_body(
    client: httpx2.AsyncClient,
    method: str,
    url: str,
    upstream: UpstreamPolicy,
    *,
    what: str = "the answer",
    **options: Any,
) -> tuple[httpx2.Response, bytes]:
    """One request and its whole body, bounded: an error status raises `UpstreamFault`
    (`check_status`), a body over `max_body` `PeerProtocolError`; either way the
    connection is dropped, not pooled."""
    async with client.stream(method, url, **options) as response:
        await check_status(response, upstream)
        body = await read_body(response, upstream.max_body, what=what)
    return response, body


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
        request = response.request  # its method and URL name it (the query may hold a key)
        work.started(response, label=f"{request.method} {_without_query(request.url)}")
        yield response


def _without_query(url: httpx2.URL) -> str:
    """`scheme://host[:port]/path`: no user info, query or fragment (a secret's places)."""
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}{url.path}"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One server-sent event: its `event:` name (`"message"` if none) and its data."""

    event: str
    data: str


MAX_EVENT_BYTES = UpstreamPolicy().max_event
"""The largest server-sent event `server_sent_events` accepts by default (its lines
together): `UpstreamPolicy.max_event`."""


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
