"""What every room of one bridged identity shares, and the forward in flight.

Per identity: the REST client, the target, the global cap on concurrent
forwards (one `CapacityLimiter` for the whole bridge), the memory of what was
forwarded (dedup), counters for the health endpoint, and a pulse for tests
and the graceful stop. Nothing here reaches back up: rooms write counters,
the identity reads them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import trio

from ..contract import Cutoff, Threads, TurnControl
from ..link import RestClient
from ..policy import Policy
from ..runtime._parts import AbortKind, Changes, RemoteStopLog, wait_settled
from ._policy import BridgePolicy
from ._targets import Target

__all__ = ["Counters", "Forward", "Forwarded", "Shared"]


class Forwarded:
    """Message ids forwarded successfully, least recently used dropped first.

    Only a forward the target took is recorded, so a failed or cancelled one is
    forwarded again when the message comes back (a redelivery, a rehydration, the
    catch-up after play)."""

    def __init__(self, memory: int) -> None:
        self._memory = memory
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def add(self, message_id: str) -> None:
        self._ids[message_id] = None
        self._ids.move_to_end(message_id)
        while len(self._ids) > self._memory:
            self._ids.popitem(last=False)


@dataclass
class Counters:
    """What one identity's forwards did (read by `GET /health`)."""

    in_flight: int = 0
    delivered: int = 0
    failed: int = 0
    cancelled: int = 0
    """Forwards cut off by an interrupt or stop (running ones)."""
    dropped: int = 0
    """Queued forwards an interrupt or stop cleared before they started."""
    nudges: int = 0
    """`/next` catch-ups run (start-up rehydration, rejoins, plays)."""
    overflowed: int = 0
    """Times a room's queue was full: its messages dropped for a `/next` catch-up."""


@dataclass
class Shared:
    agent_id: str
    rest: RestClient
    target: Target
    limiter: trio.CapacityLimiter
    policy: Policy
    bridge_policy: BridgePolicy
    changes: Changes
    forwarded: Forwarded
    given_up: Forwarded
    """Messages marked `failed` after `forward_attempts`: skipped in this process."""
    settles: bool = True
    """The target's `settle = "bridge"`: the bridge claims and marks its messages."""
    settle_hinted: bool = False
    """The INFO line saying a self-settling target wants `settle = "target"` was logged."""
    stops: RemoteStopLog = field(default_factory=RemoteStopLog)
    counters: Counters = field(default_factory=Counters)
    threads: Threads = field(default_factory=lambda: Threads(Policy().adapter_threads))
    """The identity's worker threads (a target's `run_in_thread`), counted."""
    cutoff: Cutoff = field(default_factory=Cutoff)
    """The identity's rooms host's: every shielded wait of a forward (the target's
    remote start and stop, the claim's marks) ends by it; a hard stop lowers it."""


class Forward:
    """One unit of a room's queue in flight: its cancel scope, and the turn control
    that bounds and records the remote stops of its target (A2A, command)."""

    __slots__ = (
        "_reason",
        "claimed",
        "claiming",
        "control",
        "delivering",
        "done",
        "finished",
        "kind",
        "scope",
    )

    def __init__(
        self, room_id: str, key: str, policy: Policy, cutoff: Cutoff, threads: Threads
    ) -> None:
        self.scope = trio.CancelScope()
        self.control = TurnControl(
            room_id,
            key,
            stop_grace=policy.backend_stop_grace,
            kill_grace=policy.subprocess_kill_grace,
            upstream=policy.upstream,
            cutoff=cutoff,
            threads=threads,
        )
        self.kind: AbortKind | None = None
        """Why it was aborted, if it was: what decides consume or leave, never what the
        target raised."""
        self.delivering: str | None = None
        """The message being forwarded now, if it is one (what an interrupt consumes)."""
        self.claimed = False
        """The bridge's claim of `delivering` was answered (a live attempt is ours)."""
        self.claiming = False
        """A claim is in flight: a cancel now waits for its answer (`claim_answered`)."""
        self._reason: str | None = None
        self.finished = False
        """The unit's work is over (its scope is being left): an abort now aborts nothing."""
        self.done = trio.Event()
        """Set once its scope has exited."""

    def abort(self, kind: AbortKind, reason: str | None = None) -> bool:
        """Abort it for `kind`; the first abort wins. The control is told before the
        cancel, so a remote start in flight is bounded by the stop grace.

        A claim in flight is not cut off: its outcome must be known, or it could
        land after an interrupt's consuming mark and re-open the message (a claim
        after `processed` opens a new attempt). The scope is cancelled once the
        claim is answered; nothing is forwarded meanwhile."""
        if self.kind is not None or self.finished:
            return False
        self.kind, self._reason = kind, reason
        self.control.aborted(kind.value, reason)
        if not self.claiming:
            self._cancel_scope()
        return True

    def claim_answered(self) -> None:
        """The claim in flight has its answer: an abort that came meanwhile applies now."""
        self.claiming = False
        if self.kind is not None:
            self._cancel_scope()

    def _cancel_scope(self) -> None:
        kind = self.kind.value if self.kind is not None else "cancel"
        reason = self._reason
        self.scope.cancel(reason=f"{kind}: {reason}" if reason else kind)

    async def wait_settled(self, grace: float) -> bool:
        return await wait_settled(self.done, self.control, grace)
