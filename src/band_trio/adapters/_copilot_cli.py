"""`CopilotCli`: the Copilot CLI process, owned for a run and started again after a crash.

    cli = CopilotCli(config)
    async with cli.running():               # owns the process and the tasks serving it
        connection = await cli.connection() # the live CLI, started (again) if need be
        ...

The tree, all under `running()`:

    CopilotCli.running          nursery; on exit the CLI's group is ended and reaped
    └── supervisor              starts a CLI when one is wanted, serves it until it ends
        └── Connection.serve    the JSON-RPC reader and writer, and the stderr reader

`running()` asks for a CLI at once but does not wait for it: the first
`connection()` does (under `config.start_deadline`). The start spawns the CLI in
a process group of its own (`_copilot_process`), in its working folder, with an
environment of its own — `PATH`, `HOME`/`COPILOT_HOME` set to its state folder,
`COPILOT_OFFLINE=true` and the BYOK provider, telemetry and updates off, nothing
of the agent's own environment (no key of the agent's, no `GITHUB_TOKEN`) — and
sends the `connect` handshake, which must answer protocol version 3.

When the CLI exits on its own (a crash, a kill -9) its connection closes, every
session waiting on it is told why, the rest of its group is killed and the
leader reaped; the reason is logged, and the next `connection()` starts a new
one (saying why). When `running()` is left, the CLI gets SIGTERM, and SIGKILL
after `config.kill_grace`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._copilot_config import CopilotConfig
from ._copilot_process import CliProcess, spawn
from ._copilot_rpc import CopilotError, CopilotGone, CopilotRpcError, Rpc
from ._copilot_session import Session

__all__ = ["PROTOCOL_VERSION", "Connection", "CopilotCli"]

log = logging.getLogger("band_trio.adapters.copilot")

PROTOCOL_VERSION = 3
"""The CLI's SDK protocol version this client speaks (permission requests as events)."""


class Connection:
    """One running CLI: its process, its JSON-RPC peer and the sessions opened on it."""

    def __init__(self, process: CliProcess, config: CopilotConfig, number: int) -> None:
        self.process = process
        self.number = number
        """1 for the run's first CLI, 2 after one restart, ..."""
        self.rpc = Rpc(
            process.stdin,
            process.stdout,
            on_notification=self._notified,
            max_frame=config.max_frame_bytes,
            outbox=config.outbox,
        )
        self.sessions: dict[str, Session] = {}
        self.ended = trio.Event()
        """Set once the process is gone and reaped (`reason` says why)."""
        self.reason = ""
        self.version = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return not self.rpc.closed.is_set()

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return await self.rpc.request(method, params)

    def open_session(self, session: Session) -> None:
        self.sessions[session.id] = session
        if not self.alive:
            session.end(self.rpc.reason)

    def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method != "session.event":
            return  # session.lifecycle and others: nothing here needs them
        session = self.sessions.get(str(params.get("sessionId")))
        event = params.get("event")
        if session is not None and isinstance(event, dict):
            session.feed(event)

    async def handshake(self) -> None:
        answer = await self.request("connect", {"supportedTaskKinds": []})
        version = answer.get("protocolVersion") if isinstance(answer, dict) else None
        if version != PROTOCOL_VERSION:
            raise CopilotError(
                f"the Copilot CLI speaks SDK protocol {version!r}; band-trio speaks "
                f"{PROTOCOL_VERSION} (Copilot CLI 1.0.102)"
            )
        self.version = str(answer.get("version", "?"))

    async def serve(self) -> None:
        """Read and write until the CLI's output ends; then end the process, reaped."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.process.read_stderr, name="copilot stderr")
                await self.rpc.serve()
                nursery.cancel_scope.cancel()
        finally:
            self._close()

    def _close(self) -> None:
        self.rpc.close(self.rpc.reason or "the Copilot CLI is being stopped")

    async def finish(self, kill_grace: float) -> None:
        """End the process (SIGTERM, SIGKILL after the grace), reap it, and tell every
        session why the connection ended. Shielded and bounded by the grace."""
        stopping = self.alive
        self._close()
        await self.process.stop(kill_grace)
        if stopping:
            self.reason = f"the Copilot CLI was stopped (it {self.process.describe_exit()})"
        else:
            self.reason = f"the Copilot CLI {self.process.describe_exit()}"
            detail = self.process.stderr_text()[-300:]
            if detail:
                self.reason += f": {detail}"
        for session in self.sessions.values():
            session.end(self.reason)
        self.ended.set()


class _Start:
    """One start of the CLI that turns wait for: its connection, or why it failed."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.connection: Connection | None = None
        self.error: str | None = None


class CopilotCli:
    """The Copilot CLI process, owned by `running()`; see the module."""

    def __init__(self, config: CopilotConfig) -> None:
        self.config = config
        self._running = False
        self._wanted = trio.Event()
        self._start = _Start()
        self._live: Connection | None = None
        self._started = 0
        self._last_end: str | None = None
        self._made: list[str] = []
        """Folders made for this run (at the first start), removed when it ends."""
        self._nursery: trio.Nursery | None = None
        """Only to count its tasks (`tasks`): nothing else starts or cancels work in it."""
        self.home = ""
        self.working_directory = ""
        """The folders of the current run (made at its first start unless the config
        names them; a SIGKILLed agent cannot remove them: they are in the temp dir)."""

    @property
    def pid(self) -> int | None:
        """The running CLI's pid (its process group id), if one runs."""
        live = self._live
        return live.pid if live is not None and live.alive else None

    @property
    def tasks(self) -> int:
        """The tasks serving the CLI right now (its supervisor, the readers, the writer):
        owned by `running()` for the run, so a count of leaked tasks leaves them out."""
        stack = list(self._nursery.child_tasks) if self._nursery is not None else []
        count = 0
        while stack:
            task = stack.pop()
            count += 1
            for nursery in task.child_nurseries:
                stack.extend(nursery.child_tasks)
        return count

    @property
    def starts(self) -> int:
        """How many CLIs this run started (2 after one restart)."""
        return self._started

    @asynccontextmanager
    async def running(self, *, eager: bool = True) -> AsyncIterator[None]:
        """Own the CLI for the block (not re-entrant): start one in the background (or,
        with `eager=False`, at the first `connection()`), start it again on demand after
        a crash, end it (reaped) on exit."""
        if self._running:
            raise RuntimeError("CopilotCli.running() is already entered")
        self._running = True
        self._made = []
        self.home = self.config.home or ""
        self.working_directory = self.config.working_directory or ""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._supervise, name="copilot cli supervisor")
                if eager:
                    self._wanted.set()  # start it now; the first turn waits for it
                try:
                    yield
                finally:
                    nursery.cancel_scope.cancel(reason="the Copilot CLI's owner stopped")
        except BaseExceptionGroup as group:  # the block's own error, not one of ours
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        finally:
            self._running = False
            self._nursery = None
            self._live = None
            self._start = _Start()
            self._wanted = trio.Event()
            for folder in self._made:
                shutil.rmtree(folder, ignore_errors=True)
            self._made = []

    async def connection(self) -> Connection:
        """The live CLI; started (again) if it is not running. Raises `CopilotError` if
        it cannot be started within `config.start_deadline`."""
        live = self._live
        if live is not None and live.alive:
            return live
        if not self._running:
            raise CopilotError(
                "the Copilot CLI is not running: run the adapter through band-trio's Agent, "
                "or enter `adapter.lifespan()` (`CopilotCli.running()`) around its use"
            )
        with trio.move_on_after(self.config.start_deadline + self.config.kill_grace):
            while True:
                start = self._start
                if start.connection is not None:  # it died: wait until it is cleared away
                    if start.connection.alive:
                        return start.connection
                    await start.connection.ended.wait()
                    await trio.lowlevel.checkpoint()
                    continue
                self._wanted.set()
                await start.done.wait()
                if start.connection is None:
                    raise CopilotError(start.error or "the Copilot CLI did not start")
        raise CopilotError(f"the Copilot CLI did not start within {self.config.start_deadline:g}s")

    # -- the supervisor ---------------------------------------------------------

    async def _supervise(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            start = self._start
            try:
                await self._serve_one(start)
            finally:
                self._live = None
                self._start = _Start()
                if not start.done.is_set():
                    start.error = start.error or "the Copilot CLI stopped while starting"
                    start.done.set()

    async def _serve_one(self, start: _Start) -> None:
        config = self.config
        self._started += 1
        number = self._started
        if self._last_end is not None:
            log.warning("starting the Copilot CLI again (%s)", self._last_end)
        if not self.home:  # made at the first start: a run that needs no CLI leaves none
            self.home = _folder("home", self._made)
        if not self.working_directory:
            self.working_directory = _folder("work", self._made)
        try:
            process = await spawn(
                _argv(config),
                cwd=self.working_directory,
                env=_environment(config, self.home),
                stderr_tail=config.stderr_tail,
            )
        except OSError as exc:
            start.error = str(exc)
            log.warning("%s", start.error)
            return
        connection = Connection(process, config, number)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(connection.serve, name=f"copilot cli {process.pid}")
                with trio.move_on_after(config.start_deadline) as waited:
                    try:
                        await connection.handshake()
                    except (CopilotGone, CopilotRpcError, CopilotError) as exc:
                        start.error = f"the Copilot CLI's handshake failed: {exc}"
                if waited.cancelled_caught:
                    start.error = (
                        f"the Copilot CLI did not answer within {config.start_deadline:g}s"
                    )
                if start.error is None:
                    self._live = start.connection = connection
                    start.done.set()
                    log.info(
                        "Copilot CLI %s started (pid %d, in %s)",
                        connection.version,
                        process.pid,
                        self.working_directory,
                    )
                    await connection.rpc.closed.wait()  # until it ends, or the owner stops
                nursery.cancel_scope.cancel()
        finally:
            await connection.finish(config.kill_grace)
        if start.error is not None:
            start.error += _why(connection)
            log.warning("%s", start.error)
        else:
            self._last_end = connection.reason
            log.warning("%s; it is started again for the next turn", connection.reason)


def _why(connection: Connection) -> str:
    detail = connection.process.stderr_text()[-300:]
    exit_ = connection.process.describe_exit()
    return f" (the CLI {exit_}{': ' + detail if detail else ''})"


def _folder(what: str, made: list[str]) -> str:
    folder = tempfile.mkdtemp(prefix=f"band-trio-copilot-{what}-")
    made.append(folder)
    return folder


def _argv(config: CopilotConfig) -> list[str]:
    return [
        config.cli,
        "--headless",
        "--stdio",
        "--no-auto-update",
        "--no-auto-login",
        "--disable-builtin-mcps",
        "--disallow-temp-dir",
        "--log-level",
        "error",
    ]


def _environment(config: CopilotConfig, home: str) -> dict[str, str]:
    """The CLI's whole environment: nothing of the agent's but `PATH` and the locale."""
    env = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL") if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(
        {
            "HOME": home,
            "COPILOT_HOME": home,
            "COPILOT_OFFLINE": "true",  # no GitHub auth, telemetry, web tools or updates
            "COPILOT_PROVIDER_BASE_URL": config.base_url,
            "COPILOT_PROVIDER_TYPE": config.provider_type,
            "COPILOT_PROVIDER_WIRE_API": config.wire_api,
            "COPILOT_MODEL": config.model,
            "COPILOT_GITHUB_TELEMETRY_DISABLED": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_SKIP_CLI_DOWNLOAD": "1",
            "COPILOT_DISABLE_KEYTAR": "1",
            "NO_COLOR": "1",
        }
    )
    return env
