"""Serving a small ASGI app with hypercorn's trio worker, closed gracefully and bounded.

Used by the bridge's health endpoint and by the host. The server runs until
`stop` is set (or its task is cancelled); then hypercorn gets `grace` for the
requests still open, and the whole stop is bounded by twice that.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from ..errors import ConfigurationError

__all__ = ["serve_app"]


async def serve_app(
    app: Any,
    host: str,
    port: int,
    stop: trio.Event,
    grace: float,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on `host:port` until `stop`; `task_status.started(bound_port)`."""
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("band_trio.bridge.server")  # quiet unless asked
    config.graceful_timeout = grace
    async with trio.open_nursery() as nursery:
        try:
            binds: list[str] = await nursery.start(
                partial(serve, app, config, shutdown_trigger=stop.wait)
            )
        except* OSError as group:
            error = group.exceptions[0]
            why = error.strerror if isinstance(error, OSError) else None
            raise ConfigurationError(f"cannot listen on {host}:{port}: {why or error}") from None
        task_status.started(int(binds[0].rsplit(":", 1)[1]))
        await stop.wait()
        nursery.cancel_scope.deadline = trio.current_time() + 2 * grace
