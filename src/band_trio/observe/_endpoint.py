"""`GET /metrics` through the server seam: `MetricsApp`, `serve_metrics`.

The endpoint is one more band-trio server, so it is served by
`band_trio.server.serve` like the others: loopback unless the caller opts in,
a Host allow-list (a page that rebinds its name to 127.0.0.1 cannot read it),
other origins refused, no framing, bounded sends, a bounded close. It only
reads: `GET` and `HEAD` of `/metrics`; everything else is 404 or 405.
"""

from __future__ import annotations

import trio

from ..server import (
    Listening,
    Receive,
    Scope,
    Send,
    ServeSettings,
    answer,
    check_bind,
    check_port,
    serve,
)
from ._instruments import REGISTRY
from ._metrics import Registry
from ._policy import ObservePolicy

__all__ = ["CONTENT_TYPE", "MetricsApp", "serve_metrics"]

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"
_TEXT = b"text/plain; charset=utf-8"


class MetricsApp:
    """The ASGI app: the registry rendered at every scrape."""

    def __init__(self, registry: Registry = REGISTRY) -> None:
        self._registry = registry
        self.scrapes = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            return
        method = scope["method"]
        if scope["path"] != "/metrics":
            await answer(send, 404, b"not found: the metrics are at /metrics\n", content_type=_TEXT)
        elif method not in ("GET", "HEAD"):
            allow = ((b"allow", b"GET, HEAD"),)
            await answer(send, 405, b"method not allowed\n", allow, content_type=_TEXT)
        else:
            self.scrapes += 1
            body = self._registry.render()
            headers = ((b"cache-control", b"no-store"),)
            head = method == "HEAD"
            await answer(send, 200, body, headers, head=head, content_type=CONTENT_TYPE)


async def serve_metrics(
    host: str,
    port: int,
    *,
    allow_remote: bool = False,
    policy: ObservePolicy | None = None,
    registry: Registry = REGISTRY,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[Listening] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `/metrics` on `host:port` (loopback unless `allow_remote`; port 0 picks
    one) until `stop` is set or the caller cancels; `task_status.started(Listening)`."""
    check_port(port)
    what, opt_in = "the metrics endpoint", "--metrics-allow-remote"
    check_bind(host, what=what, allow_remote=allow_remote, opt_in=opt_in)
    policy = policy or ObservePolicy()
    settings = ServeSettings(grace=policy.metrics_grace, policy=policy.server)
    await serve(MetricsApp(registry), host, port, settings, stop=stop, task_status=task_status)
