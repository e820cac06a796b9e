"""One way to answer an HTTP request, and one error a route raises, for every app
served through `serve`.

The embedded platform (REST, console), the runs API, the bridge's health
endpoint and host, the metrics endpoint and the test kit's target each used to
write their ASGI start and body messages by hand, and the platform and the runs
API each had an `HttpError`. They answer through here instead, so that an
answer is built one way: `content-type` and `content-length` first, then the
app's own headers, then the whole body in one message (a 204 carries neither,
RFC 9110 §8.6). The `Guard` adds the framing headers to each on its way out.

`HttpError` carries what an app needs to answer an error — a status, a code, a
message, optional details, headers and a kind — and not the envelope: each API
keeps its own error shape (the Band platform's, the runs API's OpenAI-style
one), rendered where it is caught.

A streamed answer (an event stream) starts its own response: it is not one
message and is not built here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

import msgspec

from ..errors import BandTrioError

__all__ = ["JSON", "Headers", "HttpError", "Receive", "Scope", "Send", "answer", "answer_json"]

Scope = MutableMapping[str, Any]
"""An ASGI connection scope."""
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
"""An ASGI `receive`."""
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
"""An ASGI `send`."""
Headers = Sequence[tuple[bytes, bytes]]
"""Response headers, lower-case names, in the order they are sent."""

JSON = b"application/json"
_encode = msgspec.json.Encoder().encode


async def answer(
    send: Send,
    status: int,
    body: bytes = b"",
    headers: Headers = (),
    *,
    content_type: bytes = JSON,
    head: bool = False,
) -> None:
    """Answer `status` with `body` (JSON unless `content_type` says otherwise) and
    `headers` after the content ones; `head`: a HEAD request's answer, the length
    of `body` without it. A 204 sends only `headers`."""
    if status == 204:
        start = list(headers)
        body = b""
    else:
        length = str(len(body)).encode()
        start = [(b"content-type", content_type), (b"content-length", length), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": b"" if head else body})


async def answer_json(send: Send, status: int, value: Any, headers: Headers = ()) -> None:
    """Answer `status` with `value` encoded as JSON (msgspec: dicts, lists, structs)."""
    await answer(send, status, _encode(value), headers)


class HttpError(BandTrioError):
    """Raised by a route to answer with an error; the app renders its own envelope.

    `details` (a field → problems map, the platform's 422s) and `kind` (the runs
    API's error `type`) are read only by the API that uses them; `headers` go
    out with the answer (a 429's `retry-after`)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        kind: str | None = None,
        headers: Headers = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.kind = kind
        self.headers = tuple(headers)
