"""Serving the runs API with hypercorn's trio worker: `open_runs_api`, `serve_runs_api`.

    serve_runs_api                   one nursery
    ├── RunsService.run              owns every run
    └── hypercorn serve              the HTTP server, in a shielded scope

Closing is ordered so that nothing is cut off mid-answer: the service takes
no new run and stops the running ones (each gets `RunsPolicy.shutdown_grace`
to settle, so their event streams end with their terminal event), then
hypercorn is told to stop and gives in-flight requests `request_grace`. The
server's shield gets a deadline at that moment, so closing cannot hang on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from ..contract import Adapter
from ..errors import ConfigurationError
from ._app import RunsApp
from ._policy import RunsPolicy
from ._service import RunsService, log

__all__ = ["MIN_KEY_LENGTH", "RunsServer", "check_api_key", "open_runs_api", "serve_runs_api"]

MIN_KEY_LENGTH = 16
"""Hermes refuses to start with a key shorter than this, even on loopback: so do we."""


def check_api_key(key: str | None) -> str:
    """The key, or a `ConfigurationError` saying why it will not do."""
    if not key:
        raise ConfigurationError(
            "the runs API needs a key: --api-key or BAND_RUNS_API_KEY "
            f"(at least {MIN_KEY_LENGTH} characters)"
        )
    if len(key) < MIN_KEY_LENGTH or any(c.isspace() or not c.isprintable() for c in key):
        raise ConfigurationError(
            f"the runs API key must be at least {MIN_KEY_LENGTH} printable characters "
            f"without spaces (got {len(key)})"
        )
    return key


def _port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigurationError(f"a port is a number from 0 to 65535, not {port!r}")
    return port


@dataclass(frozen=True, slots=True)
class RunsServer:
    """A runs API being served: where, and the service behind it."""

    url: str
    """`http://host:port` (no trailing slash)."""
    service: RunsService

    def close(self) -> None:
        """Stop every run and close the server (`serve_runs_api` then returns)."""
        self.service.close()


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def serve_runs_api(
    adapter: Adapter,
    *,
    api_key: str,
    host: str = "127.0.0.1",
    port: int = 0,
    policy: RunsPolicy | None = None,
    model: str = "band-trio",
    task_status: trio.TaskStatus[RunsServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until `RunsServer.close()` or a cancel; report the server once listening."""
    key, port = check_api_key(api_key), _port(port)
    policy = policy or RunsPolicy()
    service = RunsService(adapter, policy, model=model)
    config = Config()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = log  # hypercorn's own lines follow the host's logging level
    config.graceful_timeout = policy.request_grace
    config.backlog = policy.listen_backlog
    app: Any = RunsApp(service, key)  # hypercorn's Framework type wants TypedDict scopes
    stop_http = trio.Event()
    shield = trio.CancelScope(shield=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        try:
            binds: list[str] = await nursery.start(_serve_http, app, config, stop_http, shield)
        except* OSError as group:
            service.close()
            error = _first_leaf(group)
            why = error.strerror if isinstance(error, OSError) else None
            raise ConfigurationError(f"cannot listen on {host}:{port}: {why or error}") from None
        task_status.started(RunsServer(f"http://{host}:{binds[0].rsplit(':', 1)[1]}", service))
        try:
            await service.wait_closing()
        finally:
            service.close()
            # the runs settle (bounded), so their event streams end on their own
            with trio.move_on_after(policy.shutdown_grace, shield=True):
                await service.wait_idle()
            shield.deadline = trio.current_time() + policy.request_grace + policy.close_margin
            stop_http.set()


async def _serve_http(
    app: Any,
    config: Config,
    stop: trio.Event,
    shield: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[list[str]],
) -> None:
    """hypercorn, shielded: a cancel from outside does not cut answers off mid-body;
    `stop` closes it gracefully (and the shield gets a deadline then)."""
    with shield:
        async with trio.open_nursery() as http:
            binds: list[str] = await http.start(
                partial(serve, app, config, shutdown_trigger=stop.wait)
            )
            task_status.started(binds)


@asynccontextmanager
async def open_runs_api(
    adapter: Adapter,
    *,
    api_key: str,
    host: str = "127.0.0.1",
    port: int = 0,
    policy: RunsPolicy | None = None,
    model: str = "band-trio",
) -> AsyncIterator[RunsServer]:
    """Serve the runs API for the duration of the block, then close it cleanly."""
    async with trio.open_nursery() as nursery:
        server: RunsServer = await nursery.start(
            partial(
                serve_runs_api,
                adapter,
                api_key=api_key,
                host=host,
                port=port,
                policy=policy,
                model=model,
            )
        )
        try:
            yield server
        finally:
            server.close()
