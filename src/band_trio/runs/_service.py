"""The runs themselves: a nursery the server owns, one task and one scope per run.

    RunsService.run                  the server's nursery; owns every run
    ├── sweeper                      forgets settled runs when their window ends
    └── run (one task each)
        └── run.scope                a stop cancels it (with its reason)
            └── session lock         runs of one session are serial
                └── adapter.on_turn  through the same `Turn` as a room's turn

HTTP handlers never own a run: `start` registers it and hands it to the
nursery before the 202 is sent (so a stop that comes next always finds it),
`stop` cancels its scope and, for `?wait=true`, waits on its `settled` event
under the policy's bounded wait. Closing stops every run, gives them
`RunsPolicy.shutdown_grace` to settle, and ends the nursery; a run that
ignores its cancel past that is reported, never silently dropped.
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from typing import Any

import trio

from ..contract import Adapter, LastAbort, Threads, Turn, adapter_failure, turn_context
from ..errors import BandTrioError
from ..observe import hooks as observe
from ._policy import RunsPolicy
from ._request import RunRequest
from ._run import USAGE, Run, RunStatus
from ._session import RunPort, Session

__all__ = ["Draining", "RunsService", "TooManyRuns"]

log = logging.getLogger("band_trio.runs")

SHUTDOWN_REASON = "the runs API is shutting down"
INTERRUPTED = "the runs API shut down before the run ended"
"""The `error` of a run the shutdown stopped (Hermes: "Gateway shutdown interrupted
the run.")."""


_ADAPTER_THREADS = 16
"""`Policy.adapter_threads`' default: the runs' worker threads at once."""


class TooManyRuns(BandTrioError):
    """The concurrent-run limit is reached (a 429)."""


class Draining(BandTrioError):
    """The server is closing and takes no new run (a 503)."""


class RunsService:
    """Starts, stops and keeps runs; `run()` is the nursery that owns them."""

    def __init__(self, adapter: Adapter, policy: RunsPolicy, *, model: str = "band-trio") -> None:
        self.adapter = adapter
        self.policy = policy
        self.model = model
        self.runs: dict[str, Run] = {}
        """Every run that can be read: live ones and those in their retention window."""
        self.active: dict[str, Run] = {}
        """Runs not yet settled: what the concurrent-run limit counts."""
        self.sessions: dict[str, Session] = {}
        self._retained: deque[Run] = deque()
        self._retained_added = trio.Event()
        self._idle = trio.Event()
        self._idle.set()
        self._closing = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._interrupting: set[str] = set()
        """Live runs the shutdown stopped (not a client): they settle `interrupted`."""
        self.overrun: list[str] = []
        """Runs still going when the service closed (their adapter ignored the stop)."""
        self.threads = Threads(_ADAPTER_THREADS)
        """The runs' worker threads and asyncio loop (`run_in_thread`, `run_asyncio`)."""

    # -- the nursery -------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the runs until `close()`; then stop them and wait (bounded) for them."""
        try:
            async with self.adapter.lifespan(), trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._sweep, name="runs sweeper")
                task_status.started()
                try:
                    await self._closing.wait()
                finally:
                    self._stop_all()
                    with trio.move_on_after(self.policy.shutdown_grace, shield=True):
                        await self._idle.wait()
                    self.overrun = sorted(self.active)
                    if self.overrun:
                        log.warning(
                            "%d run(s) did not stop within %gs: %s",
                            len(self.overrun),
                            self.policy.shutdown_grace,
                            ", ".join(self.overrun),
                        )
                    nursery.cancel_scope.cancel(reason="the runs API closed")
        finally:  # a run's asyncio task that ignored its stop: cancelled again, waited for
            await self.threads.aclose(self.policy.backend_stop_grace)

    def close(self) -> None:
        """Take no more runs, stop the running ones; `run()` then ends (bounded)."""
        self._closing.set()
        self._stop_all()

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    async def wait_closing(self) -> None:
        """Return once `close()` was called."""
        await self._closing.wait()

    async def wait_idle(self) -> None:
        """Return once no run is live (the caller's deadline bounds it)."""
        await self._idle.wait()

    def sample(self) -> observe.Sample:
        """What `/metrics` shows of the runs now: running, and queued behind their
        session's previous run."""
        running = sum(1 for run in self.active.values() if run.began)
        return observe.Sample("run", in_progress=running, queued=len(self.active) - running)

    def _stop_all(self) -> None:
        """Stop every live run as a stop does (its remote work stopped too); each one
        this stop reached settles `interrupted`, as Hermes marks them since #114774.
        One a client stopped first stays `cancelled`: its stop is what ended it."""
        for run in list(self.active.values()):
            if run.stop(SHUTDOWN_REASON):
                self._interrupting.add(run.id)

    def live_tasks(self) -> int:
        """The tasks alive under the service's nursery (its sweeper, its runs and what
        their adapters started): what a leak test counts."""
        pending = list(self._nursery.child_tasks) if self._nursery is not None else []
        count = 0
        while pending:
            task = pending.pop()
            count += 1
            for nursery in task.child_nurseries:
                pending.extend(nursery.child_tasks)
        return count

    # -- starting ------------------------------------------------------------------------

    def start(self, request: RunRequest) -> Run:
        """Register a run and hand it to the nursery; it runs once its session is free."""
        if self._closing.is_set() or self._nursery is None:
            raise Draining
        if len(self.active) >= self.policy.max_concurrent_runs:
            raise TooManyRuns
        run_id = f"run_{uuid.uuid4().hex}"
        session_id = request.session_id or run_id
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = Session(
                session_id, self.policy.max_session_messages
            )
        run = Run(run_id, request, session, self.model, self.policy, self.threads)
        session.runs += 1
        self.runs[run_id] = run
        self.active[run_id] = run
        self._idle = trio.Event()
        self._nursery.start_soon(self._drive, run, name=f"run {run_id}")
        return run

    async def _drive(self, run: Run) -> None:
        """The run, watched as one unit (`observe.Work`): its span, status, duration,
        and the latency of its stop."""
        watch = observe.Work("run", run.control, room_id=run.session.id, message_id=run.id, log=log)
        with watch:
            try:
                await self._run(run)
            finally:
                watch.outcome = run.status.value
                watch.failure = run.error

    async def _run(self, run: Run) -> None:
        policy = self.policy
        try:
            with run.scope:
                async with run.session.lock:
                    run.begin()
                    run.session.messages.append(run.message)
                    deadline = trio.current_time() + policy.run_deadline
                    run.scope.deadline = run.control.deadline = deadline
                    port = RunPort(run)
                    turn = Turn(
                        run.message, port, control=run.control, last_abort=run.session.last_abort
                    )
                    try:
                        with observe.adapter_call(self.model, self.adapter), turn_context(turn):
                            await self.adapter.on_turn(turn)
                        run.finished = True  # no checkpoint since the return
                    except BaseException as exc:  # SystemExit and the like: this run fails
                        if not adapter_failure(exc):  # a cancel, or a real Ctrl-C: on up
                            raise
                        run.finished = True
                        run.error = f"{type(exc).__name__}: {exc}"[:500]
                        if run.stop_requested_at is not None:  # its stop ended it: no failure
                            log.info("run %s: stopped; it ended with %s", run.id, run.error)
                        else:
                            log.warning("run %s failed: %s", run.id, run.error, exc_info=exc)
        finally:
            self._settle(run)

    def _settle(self, run: Run) -> None:
        """Record how the run ended, send its terminal event, start its window."""
        scope = run.scope
        fields: dict[str, Any]
        outside = run.stop_requested_at is None and not run.finished and not scope.cancelled_caught
        if run.id in self._interrupting or outside:  # (outside: the nursery's cancel)
            self._interrupting.discard(run.id)
            run.cancel_reason = run.cancel_reason or SHUTDOWN_REASON
            run.error = INTERRUPTED
            status, name = RunStatus.INTERRUPTED, "run.interrupted"
        elif run.stop_requested_at is not None:
            status, name = RunStatus.CANCELLED, "run.cancelled"
            if run.began:  # the adapter saw it: its next run in the session is told why
                run.session.last_abort = LastAbort("stop", run.cancel_reason, run.id)
        elif not run.finished:  # its own deadline
            run.error = f"the run ran past its {self.policy.run_deadline:g}s deadline"
            status, name = RunStatus.FAILED, "run.failed"
        elif run.error is not None:
            status, name = RunStatus.FAILED, "run.failed"
        else:
            status, name = RunStatus.COMPLETED, "run.completed"
        run.settle(status, self.policy.retention)
        if status is RunStatus.CANCELLED:
            fields = run.stop_fields()
        elif status is RunStatus.INTERRUPTED:
            fields = {"error": run.error, **run.stop_fields()}
        elif status is RunStatus.FAILED:
            fields = {"error": run.error}
        else:
            fields = {"output": run.output, "usage": USAGE}
        if run.guidance.leftover is not None:  # Hermes' `pending_steer`: the client's to resend
            fields["pending_steer"] = run.guidance.leftover
        run.events.emit(name, **fields)
        if run.overrun:
            log.warning("run %s settled %.1fs after its stop", run.id, self._since_stop(run))
        del self.active[run.id]
        if not self.active:
            self._idle.set()
        self._retained.append(run)
        while len(self._retained) > self.policy.max_retained_runs:
            self._forget(self._retained.popleft())
        self._retained_added.set()

    @staticmethod
    def _since_stop(run: Run) -> float:
        assert run.settled_at is not None and run.stop_requested_at is not None
        return run.settled_at - run.stop_requested_at

    # -- stopping ------------------------------------------------------------------------

    async def stop(self, run: Run, reason: str | None, *, wait: bool) -> dict[str, Any]:
        """Stop `run` (idempotent); with `wait`, answer once it has settled or once the
        bounded wait is over, whichever is first. The answer body."""
        if run.stop(reason):
            log.info("run %s: stop%s", run.id, f" ({reason})" if reason else "")
        if wait and not run.settled.is_set():
            began = run.stop_requested_at
            start = began if began is not None else trio.current_time()
            with trio.move_on_at(start + self.policy.stop_wait):
                await run.settled.wait()
            if not run.settled.is_set():
                log.warning(
                    "run %s: still running %gs after its stop (its adapter ignores the cancel)",
                    run.id,
                    self.policy.stop_wait,
                )
        return run.stop_body()

    # -- forgetting ----------------------------------------------------------------------

    async def _sweep(self) -> None:
        """Forget each settled run when its retention window ends (oldest first: every
        window has the same length, so they end in the order the runs settled)."""
        while True:
            while not self._retained:
                await self._retained_added.wait()
                self._retained_added = trio.Event()
            run = self._retained[0]
            await trio.sleep_until(run.expires_at)
            if self._retained and self._retained[0] is run:
                self._forget(self._retained.popleft())

    def _forget(self, run: Run) -> None:
        del self.runs[run.id]
        run.forgotten.set()
        session = run.session
        session.runs -= 1
        if session.runs == 0 and self.sessions.get(session.id) is session:
            del self.sessions[session.id]
            if self._nursery is not None:
                self._nursery.start_soon(self._session_gone, session.id)

    async def _session_gone(self, session_id: str) -> None:
        """Tell the adapter the session's room is gone (it drops what it kept for it)."""
        with trio.move_on_after(self.policy.hook_deadline, shield=True):
            try:
                await self.adapter.on_room_left(session_id)
            except BaseException as exc:
                if not adapter_failure(exc):
                    raise
                log.exception("on_room_left(%s) failed", session_id)
