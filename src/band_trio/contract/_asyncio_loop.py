"""One asyncio event loop, in a thread of its own, for the asyncio code of an owner's turns.

Most agent frameworks are asyncio (LangGraph, the OpenAI Agents SDK). Their code
cannot run on trio's loop, so it runs on this one, as asyncio tasks; the trio turn
waits for each task, and cancels it when the turn is aborted (`run_asyncio`).

Why a loop in a thread, not trio-asyncio, and the figures behind it:
docs/discussion/dependencies.md, "Why asyncio code runs on a loop in a thread".

The loop is started on first use and closed by its owner (`aclose`), or, for an
owner that never closes it (a turn built by hand in a script, or an owner used in a
`trio.run` of a library user's), by a system task of the trio run it was started
in, when that run ends. Closing cancels every task still on the loop — a task that
ignored its turn's cancel, a framework's fire-and-forget task — and waits for them,
bounded; what outlives that is logged and counted, and the loop's thread (a daemon)
no longer holds the process.

Every touch of an asyncio object happens in the loop's thread (submitted with
`call_soon_threadsafe`, so in order); every touch of a trio object in the trio
thread (handed back with `TrioToken.run_sync_soon`). Nothing else is shared.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import outcome
import trio

from ..observe import hooks as observe
from ._asyncio_job import AsyncioJob, AsyncioStats, Overran

__all__ = ["AsyncioLoop"]

log = logging.getLogger("band_trio.asyncio")

CANCEL_MESSAGE = "band-trio: the turn was aborted"
"""The message of the `CancelledError` a turn's abort throws into its asyncio task."""


class AsyncioLoop:
    """An owner's asyncio loop: one thread, started on first use, any number of turns."""

    def __init__(self, name: str = "band-trio asyncio") -> None:
        self.name = name
        self._lock = threading.Lock()  # the loop's thread reads `_loop` when it ends
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._thread_ended: trio.Event | None = None
        self._closing = False
        self._closed = trio.Event()
        self._jobs: set[AsyncioJob] = set()
        self._overran_running: set[AsyncioJob] = set()
        self._overran_total = 0
        self._overruns: collections.deque[Overran] = collections.deque(maxlen=_KEPT_OVERRUNS)
        # the loop's thread only: each job's task, and every task started in its context
        self._tasks: dict[AsyncioJob, asyncio.Task[Any]] = {}
        self._families: dict[AsyncioJob, set[asyncio.Task[Any]]] = {}

    @property
    def started(self) -> bool:
        return self._loop is not None

    @property
    def stats(self) -> AsyncioStats:
        return AsyncioStats(len(self._jobs), self._overran_total, len(self._overran_running))

    # -- the trio side ----------------------------------------------------------

    def submit(
        self,
        async_fn: Callable[..., Awaitable[Any]],
        args: tuple[object, ...],
        context: contextvars.Context,
        label: str,
        where: tuple[str, str] = ("", ""),
    ) -> AsyncioJob:
        """Start `async_fn(*args)` as a task on the loop, in `context`; returns at once."""
        if self._closing:
            raise RuntimeError(f"{self.name}: the asyncio loop is closing; no new work starts")
        if self._loop is None:
            self._start()
        job = AsyncioJob(self, label, *where)
        self._jobs.add(job)
        token = trio.lowlevel.current_trio_token()
        self._call(self._start_task, job, async_fn, args, context, token)
        return job

    async def aclose(self, grace: float) -> int:
        """Cancel every task still on the loop, wait up to `grace` for them, then stop the
        loop and its thread; returns how many tasks were still running (0: all ended).

        Shielded: an owner's teardown calls it once its turns are over, and it must run
        to the end even while the owner is being cancelled. The owner may start it again
        by using it again."""
        loop, thread, ended = self._loop, self._thread, self._thread_ended
        if loop is None or thread is None or ended is None or self._closing:
            return 0
        self._closing = True
        left = len(self._jobs)
        with trio.CancelScope(shield=True):
            finished = trio.Event()
            token = trio.lowlevel.current_trio_token()
            self._call(self._finish, grace, token, finished)
            with trio.move_on_after(grace + 0.5):  # the loop's own wait, and the hand-back
                await finished.wait()
                left = len(self._jobs)
            with trio.move_on_after(max(grace, 0.5)):
                await ended.wait()
            if ended.is_set():  # its last act told us: gone in a moment, seen gone here
                await trio.to_thread.run_sync(thread.join, 1.0)
            else:
                log.error(
                    "%s: the loop's thread is still busy %.1fs after its close (synchronous "
                    "code blocks it); left running as a daemon thread",
                    self.name,
                    grace,
                )
        if left:
            log.error(
                "%s: %d asyncio task(s) ignored every cancel and were still running when "
                "the loop closed: %s",
                self.name,
                left,
                ", ".join(sorted({job.label for job in self._jobs}))[:300],
            )
        self._jobs.clear()  # what is left will never report back: count it out
        for _ in self._overran_running:
            observe.asyncio_overrun_ended()
        self._overran_running.clear()
        with self._lock:
            self._loop = None
            self._thread = None
            self._thread_ended = None
        self._closed.set()
        self._closing = False
        return left

    def _start(self) -> None:
        """The loop and its thread; a system task of this trio run closes it at the run's
        end unless its owner did before."""
        # Not `asyncio.new_event_loop()`: an imported trio-asyncio replaces it with one
        # that refuses to run inside trio. The default loop on Linux, built directly.
        loop = asyncio.SelectorEventLoop()
        loop.set_task_factory(self._new_task)  # type: ignore[arg-type]
        ended = trio.Event()
        token = trio.lowlevel.current_trio_token()
        thread = threading.Thread(
            target=self._main, args=(loop, token, ended), name=self.name, daemon=True
        )
        self._loop, self._thread, self._thread_ended = loop, thread, ended
        thread.start()
        closed = self._closed = trio.Event()
        trio.lowlevel.spawn_system_task(
            self._close_at_run_end, loop, closed, name=f"{self.name}: close at the run's end"
        )

    async def _close_at_run_end(self, loop: asyncio.AbstractEventLoop, closed: trio.Event) -> None:
        """Wait for the owner's close (then end: nothing piles up when an owner starts
        and closes its loop many times in one run), or for the run's end."""
        try:
            await closed.wait()
        finally:
            if self._loop is loop:  # not closed by its owner (nor started again since)
                try:
                    await self.aclose(_RUN_END_GRACE)
                except Exception:  # a system task's error would end the user's run
                    log.exception("%s: closing the loop at the run's end failed", self.name)

    def _call(self, fn: Callable[..., object], *args: Any) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError(f"{self.name}: the asyncio loop is not running")
        loop.call_soon_threadsafe(fn, *args)

    def _job_settled(self, job: AsyncioJob) -> None:
        if job in self._overran_running:
            self._overran_running.discard(job)
            observe.asyncio_overrun_ended()

    def take_overruns(self) -> list[Overran]:
        """The tasks that ignored their turn's cancel past the stop grace since the last
        call (the newest few hundred): what an owner's stop result reports."""
        taken = list(self._overruns)
        self._overruns.clear()
        return taken

    def _overran(self, job: AsyncioJob) -> None:
        self._overran_total += 1
        self._overruns.append(Overran(job.room_id, job.message_id, job.label))
        self._overran_running.add(job)
        observe.asyncio_overran()

    # -- the loop's thread ------------------------------------------------------

    def _main(
        self, loop: asyncio.AbstractEventLoop, token: trio.lowlevel.TrioToken, ended: trio.Event
    ) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            with contextlib.suppress(Exception):  # an async generator's own close failed
                loop.run_until_complete(
                    asyncio.wait_for(loop.shutdown_asyncgens(), _ASYNCGENS_GRACE)
                )
        finally:
            loop.close()
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(ended.set)

    def _start_task(
        self,
        job: AsyncioJob,
        async_fn: Callable[..., Awaitable[Any]],
        args: tuple[object, ...],
        context: contextvars.Context,
        token: trio.lowlevel.TrioToken,
    ) -> None:
        def hand_back(result: outcome.Outcome[Any]) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(job._ended, result)

        context.run(_JOB.set, job)  # the tasks it starts are of its family (`_new_task`)
        try:
            coro = context.run(async_fn, *args)
            if not asyncio.iscoroutine(coro):
                raise TypeError(
                    f"run_asyncio needs an async function; {job.label} returned "
                    f"{type(coro).__name__}"
                )
        except BaseException as exc:  # the call itself raised: that is its outcome
            hand_back(outcome.Error(exc))
            return

        async def entered() -> Any:  # the task's first step: the code is entered now
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(job._entered.set)
            return await coro

        task = asyncio.get_running_loop().create_task(entered(), context=context)
        self._tasks[job] = task

        def done(task: asyncio.Task[Any]) -> None:
            self._tasks.pop(job, None)
            if task.cancelled() and inspect.getcoroutinestate(coro) == "CORO_CREATED":
                coro.close()  # cancelled before its first step (a close): never awaited
            if not self._families.get(job):
                self._families.pop(job, None)
            if task.cancelled():
                try:
                    task.result()
                except asyncio.CancelledError as exc:
                    hand_back(outcome.Error(exc))
                return
            error = task.exception()
            hand_back(outcome.Value(task.result()) if error is None else outcome.Error(error))

        task.add_done_callback(done)

    def _cancel_task(self, job: AsyncioJob) -> None:
        task = self._tasks.get(job)
        if task is not None:
            task.cancel(CANCEL_MESSAGE)
        asyncio.get_running_loop().create_task(self._settle(job))

    async def _settle(self, job: AsyncioJob) -> None:
        """Wait for the job's family (its task, and what ran in its context) to end."""
        while pending := {t for t in self._families.get(job, ()) if not t.done()}:
            await asyncio.wait(pending)
        with contextlib.suppress(trio.RunFinishedError):
            job._token.run_sync_soon(job._settled_now)

    def _new_task(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any],
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[Any]:
        """The loop's task factory: a task started in a job's context joins its family."""
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, context=context)
        job = (context if context is not None else contextvars.copy_context()).get(_JOB)
        if job is not None:
            family = self._families.setdefault(job, set())
            family.add(task)
            task.add_done_callback(lambda done: self._left_family(job, done))
        return task

    def _left_family(self, job: AsyncioJob, task: asyncio.Task[Any]) -> None:
        family = self._families.get(job)
        if family is None:
            return
        family.discard(task)
        if not family and job not in self._tasks:
            del self._families[job]

    def _finish(self, grace: float, token: trio.lowlevel.TrioToken, finished: trio.Event) -> None:
        loop = asyncio.get_running_loop()
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel(CANCEL_MESSAGE)

        def stop(_: object = None) -> None:
            for task in tasks:
                if not task.done():  # the close logs it once, at ERROR: not again at GC
                    setattr(task, "_log_destroy_pending", False)  # noqa: B010
            _abort_transports(loop)
            loop.call_soon(loop.stop)  # after the aborted transports' own close callbacks
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(finished.set)

        if not tasks:
            stop()
            return
        waiting = loop.create_task(asyncio.wait(tasks, timeout=grace))
        waiting.add_done_callback(stop)


def _abort_transports(loop: asyncio.AbstractEventLoop) -> None:
    """Close every socket still open on the loop: a connection an HTTP client keeps
    alive past its call (langchain-openai shares one per process) would otherwise
    outlive the loop, open and unusable. asyncio keeps no public list of a loop's
    transports; its selector loop's private one is read if it is there."""
    transports = getattr(loop, "_transports", None)
    if transports is None:
        return
    for transport in list(transports.values()):
        with contextlib.suppress(Exception):  # a transport closing already
            transport.abort()


_JOB: contextvars.ContextVar[AsyncioJob | None] = contextvars.ContextVar(
    "band_trio_asyncio_job", default=None
)
"""Set in a job's copied context: every task started in it belongs to the job."""

_KEPT_OVERRUNS = 256
"""How many overruns an owner keeps for its stop result between two looks."""

_RUN_END_GRACE = 5.0
"""How long the close at a trio run's end waits for tasks that ignore their cancel
(`Policy.backend_stop_grace`'s default)."""

_ASYNCGENS_GRACE = 1.0
"""How long the loop's async generators may take to close once its tasks are done."""
