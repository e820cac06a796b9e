"""Serving the platform with hypercorn's trio worker: `open_platform`, `run_platform`.

Closing is graceful and bounded. The server runs in a shielded scope so that
a cancel from outside (Ctrl-C, the end of an `async with`) does not tear the
sockets down mid-frame; instead it asks for a shutdown: every websocket gets a
1001 close, the platform waits briefly for them to go, then tells hypercorn
to stop (which gives in-flight requests the policy's `request_grace`). The
shield gets a deadline (`shutdown_deadline`) at that moment, so shutdown can
never hang. Every duration comes from the `PlatformPolicy`.
"""

from __future__ import annotations

import ipaddress
import os
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import msgspec
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from ..errors import ConfigurationError
from ..policy import PlatformPolicy
from ..wire.admin import ReadyInfo
from ._app import App
from ._console import PREFIX as CONSOLE
from ._console import Console
from ._log import logger
from ._platform import Platform
from ._socket import WS_PATH
from ._store import Store

__all__ = ["open_platform", "run_platform"]


def _port(port: int) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigurationError(f"a port is a number from 0 to 65535, not {port!r}")
    return port


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


def _ready_folder(path: str | os.PathLike[str]) -> None:
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        raise ConfigurationError(f"cannot write the ready file {path}: no folder {folder}")


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def _loopback(host: str) -> str:
    if host == "localhost":
        return "127.0.0.1"
    try:
        if ipaddress.IPv4Address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise ConfigurationError(f"the embedded platform binds loopback only, not {host!r}")


class _Server:
    """The shutdown handle `Platform` does not need to know about."""

    def __init__(self, policy: PlatformPolicy) -> None:
        self.policy = policy
        self.shutdown_requested = trio.Event()
        self.scope = trio.CancelScope(shield=True)

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
        config = Config()
        config.bind = [f"{host}:{port}"]
        config.accesslog = None
        config.errorlog = logger
        config.graceful_timeout = server.policy.request_grace
        config.websocket_max_message_size = server.policy.max_ws_message
        config.backlog = server.policy.listen_backlog
        hypercorn_stop = trio.Event()
        pages = Console(platform) if console else None
        app: Any = App(platform, pages)  # hypercorn's Framework type wants TypedDict scopes
        with server.scope:
            async with trio.open_nursery() as nursery:
                try:
                    binds: list[str] = await nursery.start(
                        partial(serve, app, config, shutdown_trigger=hypercorn_stop.wait)
                    )
                except* OSError as group:
                    error = _first_leaf(group)
                    why = error.strerror if isinstance(error, OSError) else None
                    raise ConfigurationError(
                        f"cannot listen on {host}:{port}: {why or error}"
                    ) from None
                bound_port = int(binds[0].rsplit(":", 1)[1])
                rest_url = f"http://{host}:{bound_port}"
                platform.serving(
                    ReadyInfo(
                        rest_url=rest_url,
                        ws_url=f"ws://{host}:{bound_port}{WS_PATH}",
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
                    pages.open()
                task_status.started(platform)
                await server.shutdown_requested.wait()
                platform.faults.clear()  # held requests proceed rather than hang
                platform.hub.close_all(1001, "platform shutting down")
                if pages is not None:
                    pages.close()
                with trio.move_on_after(server.policy.sockets_close_grace):
                    await platform.hub.wait_empty()
                hypercorn_stop.set()
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
    host, port = _loopback(host), _port(port)
    server = _Server(policy or PlatformPolicy())
    async with trio.open_nursery() as nursery:
        platform: Platform = await nursery.start(_serve, host, port, db, seed, server, console)
        try:
            yield platform
        finally:
            server.shutdown()


def _write_ready_file(path: str | os.PathLike[str], info: ReadyInfo) -> None:
    """Write atomically (temp file + rename): a reader never sees half a file."""
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".ready-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(msgspec.json.encode(info))
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


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
    host, port = _loopback(host), _port(port)
    if ready_file is not None:
        _ready_folder(ready_file)
    server = _Server(policy or PlatformPolicy())
    async with trio.open_nursery() as nursery:
        platform: Platform = await nursery.start(_serve, host, port, db, seed, server, console)
        try:
            if ready_file is not None:
                _write_ready_file(ready_file, platform.info)
            task_status.started(platform)
            await trio.sleep_forever()
        finally:
            server.shutdown()
