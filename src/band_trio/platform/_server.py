"""Serving the platform through the server seam (`band_trio.server`): `open_platform`,
`run_platform`.

The seam gives the platform its browser defences (Host allow-list, same-origin,
JSON bodies, no framing) and bounded sends. Closing is graceful and bounded.
The platform runs in a shielded scope so that a cancel from outside (Ctrl-C,
the end of an `async with`) does not tear the sockets down mid-frame; instead
it asks for a shutdown: every websocket gets a 1001 close, every console
stream ends, the platform waits briefly for the websockets to go, then tells
the server to stop (which gives in-flight requests the policy's
`request_grace`, and a write a client does not take `closing_stall`). The
shield gets a deadline (`shutdown_deadline`) at that moment, so shutdown can
never hang. Every duration comes from the `PlatformPolicy`.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import msgspec
import trio

from ..errors import ConfigurationError
from ..policy import PlatformPolicy
from ..server import Listening, ServeSettings, check_port, is_loopback, serve
from ..wire.admin import ReadyInfo
from ._app import App
from ._console import PREFIX as CONSOLE
from ._console import Console
from ._log import logger
from ._platform import Platform
from ._socket import WS_PATH
from ._store import Store

__all__ = ["open_platform", "run_platform"]


def _open_store(db: str | os.PathLike[str] | None) -> Store:
    """The store, or a `ConfigurationError` saying why `db` cannot hold it."""
    if db is None:
        return Store(None)
    path = os.fspath(db)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigurationError(f"cannot create the database {path}: no folder {folder}")
    try:
        return Store(path)
    except sqlite3.Error as exc:
        raise ConfigurationError(f"cannot use {path} as the platform's database: {exc}") from exc


def _check_ready_file(path: str | os.PathLike[str]) -> None:
    """A `ConfigurationError` now, before anything listens, if `path` cannot be written
    as `_write_ready_file` will write it: a temp file in its folder, renamed over it."""
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(folder):
        raise ConfigurationError(f"cannot write the ready file {path}: no folder {folder}")
    if os.path.isdir(target):
        raise ConfigurationError(f"cannot write the ready file {path}: it is a folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ready-", dir=folder)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the ready file {path}: {exc.strerror or exc}"
        ) from None
    os.close(fd)
    os.unlink(tmp)


def _loopback(host: str) -> str:
    """The embedded platform is a development stand-in with an admin API and no key
    of its own: it binds loopback only, and no flag changes that."""
    if host == "localhost":
        return "127.0.0.1"
    if is_loopback(host) and ":" not in host:
        return host
    raise ConfigurationError(f"the embedded platform binds loopback only, not {host!r}")


class _Server:
    """The shutdown handle `Platform` does not need to know about."""

    def __init__(self, policy: PlatformPolicy) -> None:
        self.policy = policy
        self.shutdown_requested = trio.Event()
        self.scope = trio.CancelScope()
        """Shielded once the platform has started (`_serve`): a cancel during the
        start (a Ctrl-C in the first moments of `band-trio demo`) ends it, for
        nothing has connected yet, and no `shutdown()` could reach a start that
        `nursery.start` is still waiting for."""

    def shutdown(self) -> None:
        if not self.shutdown_requested.is_set():
            self.shutdown_requested.set()
            bound = trio.current_time() + self.policy.shutdown_deadline
            self.scope.deadline = min(self.scope.deadline, bound)


async def _serve(
    host: str,
    port: int,
    db: str | os.PathLike[str] | None,
    seed: bool,
    server: _Server,
    console: bool,
    *,
    task_status: trio.TaskStatus[Platform] = trio.TASK_STATUS_IGNORED,
) -> None:
    host = _loopback(host)
    store = _open_store(db)
    platform = Platform(store, server.policy)
    try:
        seeded = platform.seed() if seed else None
        policy = server.policy
        settings = ServeSettings(
            grace=policy.request_grace,
            policy=policy.server,
            log=logger,
            backlog=policy.listen_backlog,
            ws_max_message=policy.max_ws_message,
        )
        http_stop = trio.Event()
        pages = Console(platform) if console else None
        platform.console = pages
        app = App(platform, pages)
        with server.scope:
            async with trio.open_nursery() as nursery:
                listening: Listening = await nursery.start(
                    partial(serve, app, host, port, settings, stop=http_stop)
                )
                platform.listening = listening
                rest_url = listening.url
                platform.serving(
                    ReadyInfo(
                        rest_url=rest_url,
                        ws_url=f"ws://{host}:{listening.port}{WS_PATH}",
                        admin_url=f"{rest_url}/_admin",
                        agent_id=seeded[0].id if seeded else None,
                        api_key=seeded[0].api_key if seeded else None,
                        user_id=seeded[1].id if seeded else None,
                        room_id=seeded[2].id if seeded else None,
                        pid=os.getpid(),
                        console_url=f"{rest_url}{CONSOLE}/" if pages else None,
                    )
                )
                if pages is not None:
                    await nursery.start(pages.run)
                task_status.started(platform)
                # A start cancelled meanwhile ends here (trio's `started()` leaves the task
                # where it was then, and nobody will ask it to shut down); from here on,
                # a cancel asks for a shutdown.
                await trio.lowlevel.checkpoint_if_cancelled()
                server.scope.shield = True
                await server.shutdown_requested.wait()
                platform.faults.clear()  # held requests proceed rather than hang
                platform.hub.close_all(1001, "platform shutting down")
                if pages is not None:
                    pages.close()
                with trio.move_on_after(server.policy.sockets_close_grace):
                    await platform.hub.wait_empty()
                http_stop.set()
    finally:
        platform.serving(None)
        platform.save_disconnects()
        store.close()


@asynccontextmanager
async def open_platform(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    db: str | os.PathLike[str] | None = None,
    seed: bool = True,
    policy: PlatformPolicy | None = None,
    console: bool = False,
) -> AsyncIterator[Platform]:
    """Serve a platform for the duration of the block, then shut it down cleanly.

    `db=None` keeps the state in memory; a path makes it durable across restarts.
    `console=True` also serves the browser console (`info.console_url`).
    """
    host, port = _loopback(host), check_port(port)
    server = _Server(policy or PlatformPolicy())
    async with trio.open_nursery() as nursery:
        platform: Platform = await nursery.start(_serve, host, port, db, seed, server, console)
        try:
            yield platform
        finally:
            server.shutdown()


def _write_ready_file(path: str | os.PathLike[str], info: ReadyInfo) -> None:
    """Write atomically (temp file + rename): a reader never sees half a file. What
    `_check_ready_file` could not foresee (the disk filled since, the folder went) is
    a `ConfigurationError` too: one line, not a traceback."""
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ready-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(msgspec.json.encode(info))
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the ready file {path}: {exc.strerror or exc}"
        ) from None


def _remove_ready_file(path: str | os.PathLike[str], info: ReadyInfo) -> None:
    """Remove the ready file on the way out, if it is still ours (another platform may
    have written it since): a file left behind would send agents to a dead port."""
    try:
        if msgspec.json.decode(Path(path).read_bytes(), type=ReadyInfo) == info:
            os.unlink(path)
    except (OSError, msgspec.DecodeError, RecursionError):
        pass  # gone already, or not ours to remove


async def run_platform(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    db: str | os.PathLike[str] | None = None,
    seed: bool = True,
    ready_file: str | os.PathLike[str] | None = None,
    policy: PlatformPolicy | None = None,
    console: bool = False,
    task_status: trio.TaskStatus[Platform] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled. Once listening, write `ready_file` (if given) and report
    the `Platform` through `task_status`."""
    host, port = _loopback(host), check_port(port)
    if ready_file is not None:
        _check_ready_file(ready_file)
    server = _Server(policy or PlatformPolicy())
    async with trio.open_nursery() as nursery:
        started: Platform | None = None
        try:
            started = await nursery.start(_serve, host, port, db, seed, server, console)
            if ready_file is not None:
                _write_ready_file(ready_file, started.info)
            task_status.started(started)
            await trio.sleep_forever()
        finally:
            server.shutdown()
            if ready_file is not None and started is not None:
                _remove_ready_file(ready_file, started.info)
