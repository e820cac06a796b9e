"""The browser defences every band-trio server shares: an ASGI wrapper, `Guard`.

"Loopback only, no key" does not protect a server from the browser: any page
the user opens can send requests to 127.0.0.1, and a page on a name its owner
re-points at 127.0.0.1 (DNS rebinding) can read the answers as its own. So,
before the app sees a request:

* **Host allow-list** — the `Host` header must name the server as it was bound
  (its address, `localhost`, `127.0.0.1` or `[::1]`, with the port). A
  rebinding page sends its own name: 421, and the app never runs. (A server
  bound to every interface, `0.0.0.0`, is reached by whatever name the network
  gives it: there the check is off, and the server's secret is what guards it.)
* **Origin** — absent (not a browser, or a same-origin navigation) or this very
  origin (`http://` + the Host), on every request and websocket upgrade: a page
  of another origin — a form, `fetch`, an `EventSource`, a websocket — gets 403.
* **JSON bodies only** — a request with a body must say `application/json`.
  Of the content types a page may send without a CORS preflight, none is JSON:
  a cross-origin `<form enctype="text/plain">` gets 415 even without an Origin.
* **No framing, no sniffing** — every answer carries `X-Frame-Options: DENY`,
  `Content-Security-Policy: frame-ancestors 'none'` (unless the app set a CSP
  of its own, which then says it), `X-Content-Type-Options: nosniff` and
  `Cross-Origin-Resource-Policy: same-origin`: no clickjacking, and no other
  page embeds an answer as a script or an image.

A refused request gets a short JSON error and `connection: close`, and nothing
of the app — no state, no key — is in it. Every refusal is counted
(`Guard.refused`, by reason).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import msgspec

from ._answer import answer
from ._deadline import BodyDeadline
from ._listen import is_wildcard

__all__ = ["Guard", "allowed_hosts"]

log = logging.getLogger("band_trio.server")

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_FRAMING = (
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
_NO_FRAMES = (b"content-security-policy", b"frame-ancestors 'none'")


def allowed_hosts(host: str, port: int) -> frozenset[bytes] | None:
    """The `Host` values a server bound to `host:port` answers; None: any (a wildcard
    bind, see the module docstring)."""
    if is_wildcard(host):
        return None
    bound = f"[{host}]" if ":" in host else host
    names = {"localhost", "127.0.0.1", "[::1]", bound.lower()}
    return frozenset(f"{name}:{port}".encode() for name in names)


class Guard:
    """Wrap an ASGI app with the checks above. `hosts` from `allowed_hosts`;
    `body_read`: the deadline of a request's body (`_deadline`)."""

    def __init__(self, app: Any, hosts: frozenset[bytes] | None, body_read: float) -> None:
        self.app = app
        self.hosts = hosts
        self.body_read = body_read
        self.refused: Counter[str] = Counter()
        """Requests refused, by reason (`misdirected_request`, `forbidden_origin`,
        `unsupported_media_type`, `request_timeout`)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            return  # no lifespan: the server seam runs none
        refusal = self.check(scope)
        if refusal is not None:
            reason, status, message = refusal
            self.refused[reason] += 1
            log.info("refused %s %s: %s", scope.get("method", "websocket"), scope["path"], message)
            if kind == "websocket":  # closed before the accept: hypercorn answers 403
                await send({"type": "websocket.close", "code": 1008})
            else:
                await _refuse(send, status, reason, message)
            return
        if kind == "websocket":
            await self.app(scope, receive, send)
            return
        body = BodyDeadline(receive, self.body_read)
        answered = _Answered(send)
        await self.app(scope, body.receive, answered.send)
        if body.expired:
            self.refused["request_timeout"] += 1
            if not answered.started:
                message = f"the request's body did not arrive within {self.body_read:g}s"
                await _refuse(send, 408, "request_timeout", message)

    def check(self, scope: dict[str, Any]) -> tuple[str, int, str] | None:
        """(reason, status, message) when the request must not reach the app."""
        host = origin = content_type = None
        hosts = 0
        has_body = False
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.lower()
                hosts += 1
            elif name == b"origin":
                if origin is not None:
                    return "forbidden_origin", 403, "more than one Origin header"
                origin = value.lower()
            elif name == b"content-type":
                content_type = value
            elif name == b"content-length":
                has_body = has_body or value.strip() not in (b"", b"0")
            elif name == b"transfer-encoding":
                has_body = True
        if hosts != 1 or (self.hosts is not None and host not in self.hosts):
            return "misdirected_request", 421, "this server does not answer to that Host name"
        if origin is not None and origin != b"http://" + (host or b""):
            return "forbidden_origin", 403, "requests from another origin are not accepted"
        says_body = content_type is not None or has_body
        writes = scope["type"] == "http" and scope["method"] in _BODY_METHODS
        if writes and says_body and not _is_json(content_type):
            return "unsupported_media_type", 415, "a request body must be application/json"
        return None


def _is_json(content_type: bytes | None) -> bool:
    if content_type is None:
        return False
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json"


class _Answered:
    """The app's `send`: the framing headers added, and whether it began an answer."""

    __slots__ = ("_send", "started")

    def __init__(self, send: Any) -> None:
        self._send = send
        self.started = False

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            headers = list(message.get("headers", ()))
            headers.extend(_FRAMING)
            if not any(name.lower() == _NO_FRAMES[0] for name, _ in headers):
                headers.append(_NO_FRAMES)
            message = {**message, "headers": headers}
        await self._send(message)


async def _refuse(send: Any, status: int, code: str, message: str) -> None:
    body = msgspec.json.encode({"error": {"code": code, "message": message}})
    await answer(send, status, body, ((b"connection", b"close"), *_FRAMING, _NO_FRAMES))
