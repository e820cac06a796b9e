"""Blocking code in a thread: abandoned on cancel, its late result discarded; and the
owner's asyncio loop thread.

A thread cannot be cancelled. `run_in_thread` runs blocking code with
`abandon_on_cancel=True`: an interrupt or stop returns control to the turn at
once, the thread runs on until its call returns, and what it returns is thrown
away. This is best-effort, and the turn's remote stop says so (`unconfirmed`)
unless the caller gives an `unblock` function that makes the blocking call
return early (closing the socket or stream it reads, for instance), which is
then run — in a thread too, under the stop grace — and reported `requested`.

The threads are the agent's own (`Threads`, sized by `Policy.adapter_threads`),
not trio's shared limiter. An abandoned thread keeps its slot until its call
really returns; in trio's limiter (40 slots) forty of them left every
`getaddrinfo` — each connect to a peer by name — and a subprocess's spawn waiting
for a thread. Here they use up only the adapter's own slots (a turn waiting for
one is cancellable as usual), and they are counted: `Agent.threads`, the
bridge's and the host's `/health`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

from ..observe import hooks as observe
from ..policy import Policy
from ._asyncio_loop import AsyncioLoop
from ._remote import StopAnswer, StopOutcome
from ._turn import Turn

__all__ = ["ThreadStats", "Threads", "run_in_thread"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ThreadStats:
    """The worker threads of one agent (or bridge identity, or host)."""

    limit: int
    """`Policy.adapter_threads`: how many may run at once."""
    running: int
    """Threads running a call now, abandoned ones included."""
    abandoned: int
    """Calls whose turn was aborted while they ran, over the owner's life."""
    abandoned_running: int
    """Of those, the ones still running: each holds a slot until its call returns."""


class Threads:
    """The worker threads an owner's turns may use: a limiter of their own, counted, and
    one asyncio loop in a thread (`asyncio`, for `run_asyncio`), started on first use.

    A limiter belongs to one trio run (the slot of a thread abandoned in an earlier
    run would never be given back), so each run gets fresh ones; the counts are
    kept across runs. The owner closes the asyncio loop when its turns are over
    (`aclose`); one it never closes is closed at the end of the trio run it started in."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a thread limit must be at least 1, got {limit}")
        self.limit = limit
        self._lock = threading.Lock()  # the counts change in the worker threads too
        self._running = 0
        self._abandoned = 0
        self._abandoned_running = 0
        self._run: object = None
        self._calls = trio.CapacityLimiter(limit)
        self._unblocks = trio.CapacityLimiter(limit)
        self._idle: trio.Event | None = None
        self.asyncio = AsyncioLoop()
        """The loop `run_asyncio` runs the turns' asyncio code on."""

    @classmethod
    def default(cls) -> Threads:
        """The current trio run's, for turns built without an owner's (`TurnControl`)."""
        try:
            return _DEFAULT.get()
        except LookupError:
            threads = cls(Policy().adapter_threads)
            _DEFAULT.set(threads)
            return threads

    @property
    def stats(self) -> ThreadStats:
        with self._lock:
            return ThreadStats(self.limit, self._running, self._abandoned, self._abandoned_running)

    def _limiters(self) -> tuple[trio.CapacityLimiter, trio.CapacityLimiter]:
        token = trio.lowlevel.current_trio_token()
        if self._run is not token:
            self._run = token
            self._calls = trio.CapacityLimiter(self.limit)
            self._unblocks = trio.CapacityLimiter(self.limit)
        return self._calls, self._unblocks

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn()` in one of these threads; abandoned (and counted) if cancelled."""
        calls, _ = self._limiters()
        call = _Call(self, trio.lowlevel.current_trio_token())
        try:
            result: Any = await trio.to_thread.run_sync(
                call.call, fn, abandon_on_cancel=True, limiter=calls
            )
        except BaseException:
            call.abandon()
            raise
        return result  # type: ignore[no-any-return]

    async def unblock(self, fn: Callable[[], object]) -> None:
        """`fn()` (a call that makes a blocked one return) in a thread of a limiter of its
        own: it never waits for the slot held by the very thread it unblocks."""
        _, unblocks = self._limiters()
        await trio.to_thread.run_sync(fn, abandon_on_cancel=True, limiter=unblocks)

    async def aclose(self, grace: float) -> int:
        """Close the asyncio loop, if it was started: every task still on it cancelled
        and waited for, `grace` at most. Returns how many outlived that (logged)."""
        return await self.asyncio.aclose(grace)

    async def wait_idle(self) -> None:
        """Return once no thread runs a call (abandoned ones included); the caller sets
        the deadline."""
        while self.stats.running:
            self._idle = self._idle or trio.Event()
            await self._idle.wait()

    def _became_idle(self) -> None:
        if self._idle is not None:
            self._idle.set()
            self._idle = None


_DEFAULT: trio.lowlevel.RunVar[Threads] = trio.lowlevel.RunVar("band_trio_threads")


class _Call:
    """One call, shared by the trio side and its worker thread (under the lock)."""

    def __init__(self, threads: Threads, token: trio.lowlevel.TrioToken) -> None:
        self._threads = threads
        self._token = token
        self._state = "waiting"
        """waiting → running → returned; `abandon` makes it abandoned, or skipped if the
        thread had not started the call yet."""

    def call(self, fn: Callable[[], T]) -> T | None:
        threads = self._threads
        with threads._lock:
            if self._state == "skipped":  # abandoned before it began: never run it
                return None
            self._state = "running"
            threads._running += 1
        try:
            return fn()
        finally:
            with threads._lock:
                threads._running -= 1
                if self._state == "abandoned":
                    threads._abandoned_running -= 1
                self._state = "returned"
                idle = threads._running == 0
            if idle:
                self._tell_idle()

    def _tell_idle(self) -> None:
        with contextlib.suppress(trio.RunFinishedError):  # the run is over: nobody waits
            self._token.run_sync_soon(self._threads._became_idle)

    def abandon(self) -> None:
        threads = self._threads
        with threads._lock:
            if self._state == "running":
                self._state = "abandoned"
                threads._abandoned += 1
                threads._abandoned_running += 1
            elif self._state == "waiting":
                self._state = "skipped"


async def run_in_thread(
    turn: Turn,
    fn: Callable[..., T],
    *args: object,
    unblock: Callable[[], object] | None = None,
    name: str = "thread",
) -> T:
    """`fn(*args)` in a worker thread of the turn's owner (`Policy.adapter_threads` at
    once), owned by `turn`; abandoned if the turn is aborted."""
    threads = turn._control.threads

    async def stop(_: str) -> StopAnswer:
        if unblock is None:
            return StopOutcome.UNCONFIRMED, "abandoned: a thread cannot be stopped"
        await threads.unblock(unblock)
        return StopOutcome.REQUESTED, "unblocked; the thread's late result is discarded"

    def call() -> T:
        return fn(*args)

    watch = observe.ThreadWatch()  # the metrics count the thread while it outlives its turn
    async with turn.remote(stop=stop, name=name) as work:
        work.started(getattr(fn, "__qualname__", repr(fn)))
        try:
            result = await threads.run(watch.wrap(call))
        except trio.Cancelled:
            watch.abandoned()
            raise
        work.finished()
    return result
