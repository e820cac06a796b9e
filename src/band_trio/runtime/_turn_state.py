"""A turn in flight, as the runtime sees it: its cancel scope, why it was aborted,
and what it claimed.

The turn can be aborted *before* its claim: a signal that lands while the
claim request is still in flight (the claim window) cancels the turn's scope
before it is entered, so the adapter is never called, while the claim request
itself runs to its answer. Aborting records a kind and a reason first, then
cancels the scope; settling reads the kind afterwards to decide consume vs
leave. Nothing polls a flag between awaits.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from ..contract import Cutoff, LastAbort, Message, Threads, TurnControl
from ..policy import Policy

if TYPE_CHECKING:
    from ._guidance import Guidance
    from ._questions import Desk
    from ._settle import Outcome

__all__ = ["AbortKind", "ActiveTurn", "wait_settled"]


class AbortKind(enum.Enum):
    """Why a turn's scope was cancelled by the runtime itself."""

    INTERRUPT = "interrupt"
    """The room's users interrupted: consume the message (mark it processed)."""
    STOP = "stop"
    """The room's users stopped the agent: leave the message for replay on play."""
    PLATFORM_STOP = "platform_stop"
    """The platform refused work as stopped (403, activity false): leave the message."""
    LEFT = "left"
    """The agent left the room: leave the message (it is replayed if the room comes back)."""
    SHUTDOWN = "shutdown"
    """The agent is stopping and the shutdown grace is over: leave the message."""

    @property
    def consumes(self) -> bool:
        return self is AbortKind.INTERRUPT

    def note(self, reason: str | None, message_id: str) -> LastAbort | None:
        """What the room's next turn is told of this abort (`Turn.last_abort`); None for
        aborts that are not the room's users speaking (a leave, the shutdown)."""
        if self is AbortKind.INTERRUPT:
            return LastAbort("interrupt", reason, message_id)
        if self in (AbortKind.STOP, AbortKind.PLATFORM_STOP):
            return LastAbort("stop", reason, message_id)
        return None


class ActiveTurn:
    """Runtime-side state of one turn (the adapter sees `contract.Turn`)."""

    __slots__ = (
        "abort_kind",
        "abort_reason",
        "aborted",
        "beside_end",
        "claim_settled",
        "claimed",
        "cleanup_grace",
        "control",
        "desk",
        "done",
        "draining",
        "event",
        "explained",
        "failure",
        "finished",
        "grace",
        "guidance",
        "message",
        "outcome",
        "scope",
        "settles",
        "wire",
        "working",
    )

    def __init__(
        self,
        message: Message,
        policy: Policy,
        *,
        cutoff: Cutoff | None = None,
        threads: Threads | None = None,
        settles: bool = True,
        event: str = "message_created",
        wire: object = None,
    ) -> None:
        self.message = message
        self.settles = settles
        """The runtime claims, reports `working` and marks (False: an event, or a unit
        whose far end settles it: `RoomRules.claims`)."""
        self.event = event
        """What the unit is: a message (`message_created`), or a room or participant event."""
        self.wire = wire
        """The payload as the platform sent it (what a bridge's forward passes on)."""
        self.scope = trio.CancelScope()
        self.control = TurnControl(
            message.room_id,
            message.id,
            stop_grace=policy.backend_stop_grace,
            kill_grace=policy.subprocess_kill_grace,
            upstream=policy.upstream,
            cutoff=cutoff,
            threads=threads,
            ask_timeout=policy.ask_timeout,
        )
        """The turn's remote work reads the abort from here (`contract.Turn.remote`)."""
        self.done = trio.Event()
        """Set once the turn's scope has exited (settling may still follow)."""
        self.draining = trio.Event()
        """Set when the room drains (a graceful stop): work that is only waiting, not
        working (a bridge's forward between two sends), ends then."""
        self.aborted = trio.Event()
        """Set by the first abort."""
        self.cleanup_grace = policy.cleanup_grace
        self.grace = trio.CancelScope()
        """The turn's keep-alive, its abort's watchdog, parks in this scope until the turn's
        scope exits. An abort sets its deadline one cleanup grace on, and a claim
        answered after the abort pushes it to one grace after the answer: a deadline
        wakes no task until it passes, so the signal's cancel wakes the adapter alone."""
        self.abort_kind: AbortKind | None = None
        self.abort_reason: str | None = None
        self.claimed: bool | None = None
        """True once the claim landed; None while its outcome is unknown."""
        self.claim_settled = trio.Event()
        """Set once the claim request has its answer (or failed)."""
        self.working = False
        """True once `working: true` may have reached the platform."""
        self.failure: str | None = None
        """A short label of the adapter's error, if it raised."""
        self.explained: str | None = None
        """Why the turn failed in words for the room (an `UpstreamError`'s message)."""
        self.finished = False
        """True once the adapter returned or raised: a signal after that aborts nothing."""
        self.desk: Desk | None = None
        """The room's questions (`Turn.ask`), set by the room that runs the turn."""
        self.guidance: Guidance | None = None
        """What is offered to the turn in a `STEER` room (None elsewhere)."""
        self.beside_end: Callable[[], Awaitable[None]] | None = None
        """Ends the task beside the turn's scope (its keep-alive, `_turn._KeepAlive`), quiet
        since the scope exited: settling calls it (`end_beside`) once the mark is
        answered, before `working: false`, so the mark leaves ahead of its wake."""
        self.outcome: Outcome | None = None
        """What `run_turn` settled the turn as (None until it has): the host answers its
        caller with it, so a turn that never ran is never reported done."""

    def abort(self, kind: AbortKind, reason: str | None = None) -> bool:
        """Cancel the turn for `kind`. The first abort wins; returns whether this one did."""
        if self.abort_kind is not None or self.finished:
            return False
        self.abort_kind = kind
        self.abort_reason = reason
        self.control.aborted(kind.value, reason)  # before the cancel: starts get bounded
        self.scope.cancel(reason=f"{kind.value}: {reason}" if reason else kind.value)
        self.aborted.set()
        self.grace.deadline = trio.current_time() + self.cleanup_grace
        return True

    async def end_beside(self) -> None:
        """End the task beside the turn's scope, if it still runs; returns once no
        `working: true` of it is on the wire (then `working: false` may follow)."""
        end, self.beside_end = self.beside_end, None
        if end is not None:
            await end()

    def claim_answered(self) -> None:
        """The claim request has its answer (or failed): an aborted turn's cleanup
        grace runs from now if that is later (a claim in flight runs to its answer)."""
        self.claim_settled.set()
        if self.abort_kind is not None:
            self.grace.deadline = max(self.grace.deadline, trio.current_time() + self.cleanup_grace)

    async def wait_settled(self, grace: float) -> bool:
        """Wait for the aborted turn's scope to exit: `grace` for its cleanup, plus
        whatever its remote starts and stops take (each bounded by its own grace).
        False if it overran."""
        return await wait_settled(self.done, self.control, grace)


async def wait_settled(done: trio.Event, control: TurnControl, grace: float) -> bool:
    """Wait for `done` (an aborted unit's scope exited): `grace` for its cleanup, plus
    whatever its remote starts and stops take (each bounded by its own grace, and by
    the cutoff). False if it overran."""
    deadline = trio.current_time() + grace
    while True:
        with trio.move_on_at(deadline):
            await done.wait()
            return True
        if not control.busy:
            return False
        await control.wait_quiet()
        deadline = trio.current_time() + grace
