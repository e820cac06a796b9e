"""Remote work owned by the turn: how an adapter registers work that runs elsewhere.

Cancelling the local scope is not stopping: an A2A task, an LLM stream, a
process group keeps running after the client walks away. So an adapter that
starts remote work tells the turn how to stop it:

    async with turn.remote(stop=cancel_task, name="a2a task") as work:
        with work.starting():             # shielded until the handle is known
            task_id = await start_task()
            work.started(task_id)
        async for event in stream():      # cancellable as usual
            ...
        work.finished()                   # the remote side ended: no stop needed

The rules (docs/reference/adapters.md, "Remote work"), all held here:

* the stop is sent at most once, when the block is left by a cancel or an
  error — or normally, but after the turn was aborted (an adapter that
  swallowed the cancel) — and only while the work is started and not
  finished: a stop after the remote work ended sends nothing;
* it runs in a shielded scope under `Policy.backend_stop_grace`, in the
  adapter's own task: the signal's cancel never waits for it (the control lane
  only cancels a scope), but the turn does, so the room's next turn and the
  room's teardown start only once the stop has settled;
* the start call runs shielded (`starting()`): a cancel that lands while it is
  in flight lets it finish — bounded by the stop grace from the abort on — so
  the stop goes out as soon as the handle is revealed and a started remote
  turn is never orphaned; a start cut by that bound raises `StartCutError`
  as its block ends, so no code after it uses a handle that never came;
* every stop ends `confirmed`, `requested` or `unconfirmed`, is logged with
  room and message, and is kept on the turn (`Turn.remote_stops`) and in the
  agent's stats (`Agent.remote_stops`).
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import trio

from ..errors import StartCutError
from ..observe import hooks as observe
from ..policy import Policy, UpstreamPolicy
from ._cutoff import Cutoff

if TYPE_CHECKING:
    from ._threads import Threads

__all__ = ["RemoteStop", "RemoteWork", "StopAnswer", "StopFn", "StopOutcome", "TurnControl"]

_DEFAULT = Policy()
"""The defaults a turn built without a runtime (a test, a script) falls back on."""

log = logging.getLogger("band_trio.remote")

H = TypeVar("H")


class StopOutcome(enum.Enum):
    """How a remote stop ended."""

    CONFIRMED = "confirmed"
    """The peer showed a terminal state (a `CANCELED` task, the process group gone)."""
    REQUESTED = "requested"
    """The peer accepted the stop, but no terminal state was seen."""
    UNCONFIRMED = "unconfirmed"
    """The peer refused, the stop failed, or no answer came within the deadline."""


StopAnswer = StopOutcome | tuple[StopOutcome, str] | None
StopFn = Callable[[H], Awaitable[StopAnswer]]
"""Stops the remote work named by its handle. Returns `CONFIRMED` if it saw the
peer reach a terminal state, `REQUESTED` (or None) if the peer only accepted it,
optionally with a detail (`(outcome, "why")`); raising makes the stop
`UNCONFIRMED` with the error as its detail. It runs shielded, under its deadline
(`trio.current_effective_deadline()` inside it): a stop that polls for the peer's
terminal state can spend what is left of it."""


@dataclass(frozen=True, slots=True)
class RemoteStop:
    """One remote stop and how it ended."""

    room_id: str
    message_id: str
    name: str
    """What the work was (`"a2a task"`, `"process group"`, ...)."""
    handle: str
    """The handle it was stopped by (task id, pid), as text."""
    outcome: StopOutcome
    detail: str
    """Why it ended so: the peer's answer, the error, or the deadline."""
    waited: float
    """Seconds from the turn's abort to the stop being sent (a start still in flight
    when the abort landed makes this more than zero)."""
    took: float
    """Seconds from the stop being sent to its outcome."""


class TurnControl:
    """The runtime's side of one turn's remote work.

    The runtime creates one per turn and tells it, synchronously and before it
    cancels the turn's scope, that the turn was aborted (`aborted`); the turn's
    remote works read it from here. Nothing in it waits for anything.
    """

    def __init__(
        self,
        room_id: str,
        message_id: str,
        *,
        stop_grace: float,
        kill_grace: float = _DEFAULT.subprocess_kill_grace,
        deadline: float = math.inf,
        upstream: UpstreamPolicy | None = None,
        cutoff: Cutoff | None = None,
        threads: Threads | None = None,
        ask_timeout: float = _DEFAULT.ask_timeout,
    ) -> None:
        self.room_id = room_id
        self.message_id = message_id
        self.stop_grace = stop_grace
        """`Policy.backend_stop_grace`: the deadline of one remote stop (and of a start
        still in flight after an abort)."""
        self.kill_grace = kill_grace
        """`Policy.subprocess_kill_grace`: SIGTERM to SIGKILL for a process group."""
        self.deadline = deadline
        """The turn's own deadline (trio clock); starts are bounded by it plus the grace."""
        self.upstream = upstream or UpstreamPolicy()
        """`Policy.upstream`: retries, timeouts and read limits of the turn's upstream calls."""
        self.ask_timeout = ask_timeout
        """`Policy.ask_timeout`: how long `Turn.ask` waits unless told otherwise."""
        self.posted = 0
        """Messages and events the turn posted to the room so far (`Turn.reply`,
        `Turn.send_event`): a retry never follows a post made during its attempt."""
        self._threads = threads
        self.cutoff = cutoff if cutoff is not None else Cutoff()
        """The owner's (the room host's): every shielded wait of the turn — its starts,
        its stops, its marks — ends by it too; a hard stop lowers it."""
        self.aborted_at: float | None = None
        self.abort_kind: str | None = None
        self.abort_reason: str | None = None
        self.abort_correlation: str | None = None
        """The correlation id of the control signal that aborted the turn, if one did."""
        self.stops: list[RemoteStop] = []
        self.works: list[RemoteWork[Any]] = []
        """The remote works this turn registered, in order."""
        self._starts: set[trio.CancelScope] = set()
        self._changed = trio.Event()
        self._busy = 0
        self._quiet = trio.Event()
        self._quiet.set()

    @property
    def threads(self) -> Threads:
        """The owner's worker threads (`run_in_thread`); the trio run's default ones
        for a turn built without an owner."""
        if self._threads is None:
            from ._threads import Threads  # the threads module builds on this one

            self._threads = Threads.default()
        return self._threads

    @property
    def busy(self) -> bool:
        """Whether a start is shielded or a stop is being sent right now (each bounded)."""
        return self._busy > 0

    async def wait_changed(self) -> None:
        """Return at the next change of a remote work: started, finished, stopped."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_quiet(self) -> None:
        """Return once no start is shielded and no stop is being sent."""
        await self._quiet.wait()

    def aborted(self, kind: str, reason: str | None) -> None:
        """The turn was aborted: bound every start still in flight by the stop grace."""
        if self.aborted_at is not None:
            return
        self.aborted_at = trio.current_time()
        self.abort_kind = kind
        self.abort_reason = reason
        self.abort_correlation = observe.correlation_id()  # the signal being applied now
        for scope in self._starts:
            scope.deadline = min(scope.deadline, self.aborted_at + self.stop_grace)

    def _enter(self) -> None:
        self._busy += 1
        if self._quiet.is_set():
            self._quiet = trio.Event()

    def _leave(self) -> None:
        self._busy -= 1
        if self._busy == 0:
            self._quiet.set()

    def _record(self, stop: RemoteStop) -> None:
        self.stops.append(stop)
        self._notify()
        observe.remote_stop(
            name=stop.name,
            handle=stop.handle,
            outcome=stop.outcome.value,
            detail=stop.detail,
            waited=stop.waited,
            took=stop.took,
        )
        level = logging.WARNING if stop.outcome is StopOutcome.UNCONFIRMED else logging.INFO
        log.log(
            level,
            "room %s: remote stop of %s %s for %s: %s%s (sent after %.1f ms, took %.1f ms)",
            stop.room_id,
            stop.name,
            stop.handle,
            stop.message_id,
            stop.outcome.value,
            f" ({stop.detail})" if stop.detail else "",
            stop.waited * 1000,
            stop.took * 1000,
            extra={"correlation_id": self.abort_correlation},
        )


class RemoteWork(Generic[H]):
    """Remote work of one turn and how to stop it; use as `async with turn.remote(...)`."""

    def __init__(
        self,
        control: TurnControl,
        stop: StopFn[H],
        name: str,
        grace: float | None = None,
        *,
        closes_on_cancel: bool = False,
    ) -> None:
        self._control = control
        self._stop = stop
        self.name = name
        self.closes_on_cancel = closes_on_cancel
        """Cancelling the start call stops the work (an HTTP stream: the connection
        closes): a start cut off before its handle is then a stop, `requested`."""
        self.grace = control.stop_grace if grace is None else grace
        """The stop's deadline: `Policy.backend_stop_grace` unless the work has its own."""
        self._handle: H | None = None
        self._label = "-"
        self._has_handle = False
        self._finished = False
        self._entered = False
        self._start_cut = False
        self.started_at: float | None = None
        """When (trio clock) the handle was revealed."""
        self.stop_result: RemoteStop | None = None
        """How its stop ended, once one was sent (or found impossible)."""

    @property
    def handle(self) -> H | None:
        return self._handle

    @property
    def aborted_at(self) -> float | None:
        """When (trio clock) the turn was aborted, if it was."""
        return self._control.aborted_at

    @property
    def is_started(self) -> bool:
        return self._has_handle

    @property
    def is_finished(self) -> bool:
        return self._finished

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Shield the call that starts the remote work until it reveals the handle.

        A cancel that lands meanwhile does not cut the call off (that would orphan
        what it started); from the abort on, the call gets `backend_stop_grace` to
        finish, and the turn's own deadline plus that grace at most. Call
        `started(handle)` inside the block.

        A call cut by that deadline raises `StartCutError` as the block ends, so
        the code after it never runs on a start that did not finish (a stream
        never opened, a process never spawned).
        """
        control = self._control
        deadline = control.deadline + control.stop_grace
        if control.aborted_at is not None:
            deadline = min(deadline, control.aborted_at + control.stop_grace)
        control._enter()
        try:
            with control.cutoff.shielded(deadline) as scope:
                control._starts.add(scope)
                try:
                    yield
                finally:
                    control._starts.discard(scope)
        finally:
            control._leave()
        if scope.cancelled_caught:  # cut by its deadline: whatever it started is unknown
            self._start_cut = True
            if control.cutoff.at < deadline:
                detail = "the agent was stopped at once"
            elif control.aborted_at is not None:
                detail = f"no answer within {control.stop_grace:g}s of the turn's abort"
            else:
                detail = "the turn's deadline passed"
            raise StartCutError(self.name, detail)

    def started(self, handle: H, *, label: str | None = None) -> None:
        """The remote work exists and `handle` names it: from now on an abort stops it.
        `label` is how the stop's record shows it (`RemoteStop.handle`; default
        `str(handle)`): an object such as an HTTP response is given a readable one."""
        if self._has_handle:
            raise RuntimeError(f"{self.name}: started() was already called")
        self._handle = handle
        self._label = str(handle) if label is None else label
        self._has_handle = True
        self.started_at = trio.current_time()
        self._control._notify()

    def finished(self) -> None:
        """The remote work reached its end (the peer said so): a later abort sends nothing."""
        self._finished = True
        self._control._notify()

    async def __aenter__(self) -> RemoteWork[H]:
        if self._entered:
            raise RuntimeError(f"{self.name}: a RemoteWork is entered once")
        self._entered = True
        self._control.works.append(self)
        self._control._notify()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        control = self._control
        ended_badly = exc is not None or control.aborted_at is not None
        if not ended_badly:
            self._finished = True  # left normally: the adapter is done with it
            return
        if self._has_handle and not self._finished:
            await self._send_stop()
        elif not self._has_handle and self.closes_on_cancel:
            cut = "the start was cut off before its answer: closing the connection stopped it"
            self._note(StopOutcome.REQUESTED, cut, 0, 0)
        elif not self._has_handle and self._start_cut:
            self._note(StopOutcome.UNCONFIRMED, "the start call revealed no handle in time", 0, 0)

    async def _send_stop(self) -> None:
        control = self._control
        sent = trio.current_time()
        waited = 0.0 if control.aborted_at is None else max(0.0, sent - control.aborted_at)
        outcome = StopOutcome.UNCONFIRMED
        detail = ""
        control._enter()
        try:
            with control.cutoff.shielded(sent + self.grace) as scope:
                try:
                    result = await self._stop(self._handle)  # type: ignore[arg-type]
                except Exception as error:  # the peer refused, or could not be reached
                    detail = f"{type(error).__name__}: {error}"[:200]
                else:
                    if isinstance(result, tuple):
                        result, detail = result
                    outcome = StopOutcome.REQUESTED if result is None else result
            if scope.cancelled_caught:
                outcome = StopOutcome.UNCONFIRMED
                detail = f"no answer within {self.grace:.1f}s"
                if control.cutoff.at < sent + self.grace:
                    detail = "cut off: the agent was stopped at once"
        finally:
            control._leave()
        self._note(outcome, detail, waited, trio.current_time() - sent)

    def _note(self, outcome: StopOutcome, detail: str, waited: float, took: float) -> None:
        control = self._control
        self.stop_result = RemoteStop(
            room_id=control.room_id,
            message_id=control.message_id,
            name=self.name,
            handle=self._label,
            outcome=outcome,
            detail=detail,
            waited=waited,
            took=took,
        )
        control._record(self.stop_result)
