"""A JSON-RPC peer run as a child process, owned for a run and started again after a
crash: what the Copilot CLI (`_copilot_cli`) and an ACP agent (`_acp_agent`) share.

    child = MyChild(...)                    # a `Supervisor` subclass
    async with child.running():             # owns the process and the tasks serving it
        connection = await child.connection()   # the live one, started (again) if need be
        ...

The tree, all under `running()`:

    Supervisor.running          nursery; on exit the child's group is ended and reaped
    └── supervisor              starts a child when one is wanted, serves it until it ends
        └── Connection.serve    the JSON-RPC peer's tasks, and the stderr reader

`running()` asks for a child at once but does not wait for it: the first
`connection()` does (under `start_deadline`). A start spawns the process in a
group of its own (`_stdio_process`) and runs the subclass's handshake under that
deadline. When the child exits on its own (a crash, a kill -9) its connection
closes, whoever waits on it is told why (`Connection.ended`), the rest of its
group is killed and the leader reaped; the reason is logged, and the next
`connection()` starts a new one (saying why). When `running()` is left, the child
gets SIGTERM, and SIGKILL after `kill_grace`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

import trio

from ._jsonrpc import Codec, JsonRpcPeer
from ._stdio_process import ChildProcess

__all__ = ["Connection", "Supervisor"]


class Connection:
    """One running child: its process and its JSON-RPC peer. A subclass routes what the
    child sends (`notified`, `requested`), says hello (`handshake`) and tells its own
    waiters that the child is gone (`ended`)."""

    handles_requests = False
    """Whether the child's requests go to `requested` (else each is refused)."""

    def __init__(
        self,
        process: ChildProcess,
        codec: Codec,
        *,
        number: int,
        outbox: int,
        gone: Callable[[str], Exception],
        refused: Callable[[str, int, str], Exception],
    ) -> None:
        self.process = process
        self.number = number
        """1 for the run's first child, 2 after one restart, ..."""
        self.rpc = JsonRpcPeer(
            process.stdin,
            process.stdout,
            codec,
            name=process.what,
            on_notification=self.notified,
            on_request=self.requested if self.handles_requests else None,
            outbox=outbox,
            gone=gone,
            refused=refused,
        )
        self.ended = trio.Event()
        """Set once the process is gone and reaped (`reason` says why)."""
        self.reason = ""

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return not self.rpc.closed.is_set()

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return await self.rpc.request(method, params)

    # -- for subclasses -------------------------------------------------------------

    def notified(self, method: str, params: dict[str, Any]) -> None:
        """A notification of the child's (in the reader's task: must not block)."""

    async def requested(self, method: str, params: dict[str, Any]) -> Any:
        """A request of the child's, in a task of its own; raise `RpcFault` to refuse."""
        raise NotImplementedError

    async def handshake(self) -> None:
        """The first exchange; raises to refuse the child (under the start deadline)."""

    def closed(self, reason: str) -> None:
        """The connection ended (`reason`): tell whoever waits on it."""

    # -- the process ------------------------------------------------------------------

    async def serve(self) -> None:
        """Read and write until the child's output ends; then close the peer."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.process.read_stderr, name=f"{self.process.what} stderr")
                await self.rpc.serve()
                nursery.cancel_scope.cancel()
        finally:
            self._close()

    def _close(self) -> None:
        self.rpc.close(self.rpc.reason or f"{self.process.what} is being stopped")

    async def finish(self, kill_grace: float) -> None:
        """End the process (SIGTERM, SIGKILL after the grace), reap it, and tell every
        waiter why the connection ended. Shielded and bounded by the grace."""
        stopping = self.alive
        self._close()
        await self.process.stop(kill_grace)
        what = self.process.what
        if stopping:
            self.reason = f"{what} was stopped (it {self.process.describe_exit()})"
        else:
            self.reason = f"{what} {self.process.describe_exit()}"
            detail = self.process.stderr_text()[-300:]
            if detail:
                self.reason += f": {detail}"
        self.closed(self.reason)
        self.ended.set()


C = TypeVar("C", bound=Connection)


class _Start(Generic[C]):
    """One start of the child that turns wait for: its connection, or why it failed."""

    def __init__(self) -> None:
        self.done = trio.Event()
        self.begun = False
        """The supervisor took it up: asking again would only start a second one."""
        self.connection: C | None = None
        self.error: str | None = None


class Supervisor(Generic[C]):
    """A child process owned by `running()`; see the module. A subclass launches it
    (`launch`) and may prepare what every start needs (`prepare`, at the first)."""

    def __init__(
        self,
        *,
        what: str,
        start_deadline: float,
        kill_grace: float,
        error: Callable[[str], Exception],
        log: logging.Logger,
    ) -> None:
        self.what = what
        self.start_deadline = start_deadline
        self.kill_grace = kill_grace
        self._error = error
        self._log = log
        self._running = False
        self._wanted = trio.Event()
        self._start: _Start[C] = _Start()
        self._live: C | None = None
        self._started = 0
        self._last_end: str | None = None
        self._nursery: trio.Nursery | None = None
        """Only to count its tasks (`tasks`): nothing else starts or cancels work in it."""

    # -- for subclasses -------------------------------------------------------------

    def begin(self) -> None:
        """A run begins (`running()` is entered)."""

    def prepare(self) -> None:
        """Before a start (the first of a run makes what the run needs)."""

    def cleanup(self) -> None:
        """After the run: remove what `prepare` made for it."""

    async def launch(self, number: int) -> C:
        """Spawn the child and wrap it (not yet served); an `OSError` says why not."""
        raise NotImplementedError

    def started(self, connection: C) -> None:
        """The child answered its handshake (log it)."""

    # -- the run ----------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The running child's pid (its process group id), if one runs."""
        live = self._live
        return live.pid if live is not None and live.alive else None

    @property
    def tasks(self) -> int:
        """The tasks serving the child right now (its supervisor, the readers, the writer,
        the handlers): owned by `running()` for the run, so a count of leaked tasks
        leaves them out."""
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
        """How many children this run started (2 after one restart)."""
        return self._started

    @asynccontextmanager
    async def running(self, *, eager: bool = True) -> AsyncIterator[None]:
        """Own the child for the block (not re-entrant): start one in the background (or,
        with `eager=False`, at the first `connection()`), start it again on demand after
        a crash, end it (reaped) on exit."""
        if self._running:
            raise RuntimeError(f"{type(self).__name__}.running() is already entered")
        self._running = True
        self.begin()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._supervise, name=f"{self.what}: supervisor")
                if eager:
                    self._wanted.set()  # start it now; the first turn waits for it
                try:
                    yield
                finally:
                    nursery.cancel_scope.cancel(reason=f"{self.what}'s owner stopped")
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
            self.cleanup()

    async def connection(self) -> C:
        """The live child; started (again) if it is not running. Raises the subclass's
        error if it cannot be started within `start_deadline`."""
        live = self._live
        if live is not None and live.alive:
            return live
        if not self._running:
            raise self._error(
                f"{self.what} is not running: run the adapter through band-trio's Agent, "
                f"or enter `adapter.lifespan()` (`{type(self).__name__}.running()`) around "
                "its use"
            )
        with trio.move_on_after(self.start_deadline + self.kill_grace):
            while True:
                start = self._start
                if start.connection is not None:  # it died: wait until it is cleared away
                    if start.connection.alive:
                        return start.connection
                    await start.connection.ended.wait()
                    await trio.lowlevel.checkpoint()
                    continue
                if not start.begun:
                    self._wanted.set()
                await start.done.wait()
                if start.connection is None:
                    raise self._error(start.error or f"{self.what} did not start")
        raise self._error(f"{self.what} did not start within {self.start_deadline:g}s")

    # -- the supervisor ---------------------------------------------------------

    async def _supervise(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            start = self._start
            start.begun = True
            try:
                await self._serve_one(start)
            finally:
                self._live = None
                self._start = _Start()
                if not start.done.is_set():
                    start.error = start.error or f"{self.what} stopped while starting"
                    start.done.set()

    async def _serve_one(self, start: _Start[C]) -> None:
        self._started += 1
        if self._last_end is not None:
            self._log.warning("starting %s again (%s)", self.what, self._last_end)
        self.prepare()
        try:
            connection = await self.launch(self._started)
        except OSError as exc:
            start.error = exc.strerror or str(exc)  # "cannot start ...: No such file ..."
            self._log.warning("%s", start.error)
            return
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(connection.serve, name=f"{self.what} {connection.pid}")
                with trio.move_on_after(self.start_deadline) as waited:
                    try:
                        await connection.handshake()
                    except Exception as exc:  # its error, or the peer's: it is not used
                        start.error = f"{self.what}'s handshake failed: {exc}"
                if waited.cancelled_caught:
                    start.error = f"{self.what} did not answer within {self.start_deadline:g}s"
                if start.error is None:
                    self._live = start.connection = connection
                    start.done.set()
                    self.started(connection)
                    await connection.rpc.closed.wait()  # until it ends, or the owner stops
                nursery.cancel_scope.cancel()
        finally:
            await connection.finish(self.kill_grace)
        if start.error is not None:
            start.error += _why(connection)
            self._log.warning("%s", start.error)
        else:
            self._last_end = connection.reason
            self._log.warning("%s; it is started again for the next turn", connection.reason)


def _why(connection: Connection) -> str:
    detail = connection.process.stderr_text()[-300:]
    exit_ = connection.process.describe_exit()
    return f" (it {exit_}{': ' + detail if detail else ''})"
