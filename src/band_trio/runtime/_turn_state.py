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

import trio

from ..contract import Message

__all__ = ["AbortKind", "ActiveTurn"]


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


class ActiveTurn:
    """Runtime-side state of one turn (the adapter sees `contract.Turn`)."""

    __slots__ = (
        "abort_kind",
        "abort_reason",
        "claim_settled",
        "claimed",
        "done",
        "failure",
        "finished",
        "message",
        "scope",
        "working",
    )

    def __init__(self, message: Message) -> None:
        self.message = message
        self.scope = trio.CancelScope()
        self.done = trio.Event()
        """Set once the turn's scope has exited (settling may still follow)."""
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
        self.finished = False
        """True once the adapter returned or raised: a signal after that aborts nothing."""

    def abort(self, kind: AbortKind, reason: str | None = None) -> bool:
        """Cancel the turn for `kind`. The first abort wins; returns whether this one did."""
        if self.abort_kind is not None or self.finished:
            return False
        self.abort_kind = kind
        self.abort_reason = reason
        self.scope.cancel(reason=f"{kind.value}: {reason}" if reason else kind.value)
        return True
