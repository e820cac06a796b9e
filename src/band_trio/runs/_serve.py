"""Serving the runs API through the server seam (`band_trio.server`): `open_runs_api`,
`serve_runs_api`.

    serve_runs_api                   one nursery
    ├── RunsService.run              owns every run
    └── server.serve                 the HTTP server: guarded, shielded, bounded

The seam gives the runs API its browser defences (Host allow-list, same-origin,
JSON bodies, no framing) and bounded sends: a subscriber that never reads
costs one `send_chunk` and is dropped after `send_stall`, and at the close a
write it does not take is cut after `closing_stall`. Binding anything but
loopback needs `allow_remote=True` (the key is always required).

Closing is ordered so that nothing is cut off mid-answer: the service takes
no new run and stops the running ones (each gets `RunsPolicy.shutdown_grace`
to settle, so their event streams end with their terminal event), then the
server is told to stop and gives in-flight requests `request_grace`. The
server's shield gets a deadline at that moment, so closing cannot hang on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import trio

from ..contract import Adapter
from ..observe import hooks as observe
from ..server import (
    MIN_SECRET_LENGTH,
    Listening,
    ServeSettings,
    check_bind,
    check_port,
    check_secret,
    serve,
)
from ._app import RunsApp
from ._policy import RunsPolicy
from ._service import RunsService, log

__all__ = ["MIN_KEY_LENGTH", "RunsServer", "check_api_key", "open_runs_api", "serve_runs_api"]

MIN_KEY_LENGTH = MIN_SECRET_LENGTH
"""Hermes refuses to start with a key shorter than this, even on loopback: so do we."""


def check_api_key(key: str | None) -> str:
    """The key, or a `ConfigurationError` saying why it will not do."""
    return check_secret(key, what="the runs API key", how="give --api-key or BAND_RUNS_API_KEY")


@dataclass(frozen=True, slots=True)
class RunsServer:
    """A runs API being served: where, and the service behind it."""

    url: str
    """`http://host:port` (no trailing slash)."""
    service: RunsService
    listening: Listening | None = None
    """The server (its refusals, the clients it dropped); None before it listens."""

    def close(self) -> None:
        """Stop every run and close the server (`serve_runs_api` then returns)."""
        self.service.close()


async def serve_runs_api(
    adapter: Adapter,
    *,
    api_key: str,
    host: str = "127.0.0.1",
    port: int = 0,
    policy: RunsPolicy | None = None,
    model: str = "band-trio",
    allow_remote: bool = False,
    task_status: trio.TaskStatus[RunsServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until `RunsServer.close()` or a cancel; report the server once listening.
    `host` is loopback unless `allow_remote` (`band-trio runs-api --allow-remote`)."""
    key, port = check_api_key(api_key), check_port(port)
    host = check_bind(host, what="the runs API", allow_remote=allow_remote, opt_in="--allow-remote")
    policy = policy or RunsPolicy()
    service = RunsService(adapter, policy, model=model)
    settings = ServeSettings(
        grace=policy.request_grace,
        policy=policy.server,
        log=log,  # the server's own lines follow the host's logging level
        backlog=policy.listen_backlog,
    )
    stop_http = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        tracked = observe.track(service.sample)  # the gauges of /metrics, while it serves
        try:
            listening: Listening = await nursery.start(
                partial(serve, RunsApp(service, key), host, port, settings, stop=stop_http)
            )
        except BaseException:
            service.close()
            observe.untrack(tracked)
            raise
        task_status.started(RunsServer(listening.url, service, listening))
        try:
            await service.wait_closing()
        finally:
            service.close()
            # the runs settle (bounded), so their event streams end on their own
            with trio.move_on_after(policy.shutdown_grace, shield=True):
                await service.wait_idle()
            stop_http.set()
            observe.untrack(tracked)


@asynccontextmanager
async def open_runs_api(
    adapter: Adapter,
    *,
    api_key: str,
    host: str = "127.0.0.1",
    port: int = 0,
    policy: RunsPolicy | None = None,
    model: str = "band-trio",
    allow_remote: bool = False,
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
                allow_remote=allow_remote,
            )
        )
        try:
            yield server
        finally:
            server.close()
