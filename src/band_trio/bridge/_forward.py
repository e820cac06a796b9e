"""A bridged identity's unit of work: one event forwarded to its target.

A bridged identity runs the runtime's rooms (`runtime.Room`, `RoomRules`): the
same catch-up, claim window, overflow, stop, play, leave and shutdown as an
agent's. What it does in a turn's scope is this call, in place of an adapter's
`on_turn`:

    Forwarder(turn, view)               in the turn's cancel scope
    └── up to `forward_attempts` sends  each under the global cap on forwards in
        │                               flight and its own `forward_deadline`
        └── a backoff between them      `retry_first`, doubling to `retry_max`;
                                        an interrupt or stop ends it at once

The target took it: the turn succeeded, and the room marks it `processed`
(with `settle = "bridge"`). It did not, `forward_attempts` times in a row: the
turn failed, and the room marks it `failed` with an error event, as a turn
whose adapter raised. An abort decides by its kind, never by what the target
raised as it unwound: an interrupt consumes the message, everything else leaves
it `processing` (the room's settle).

With `settle = "target"` (a `band-trio host`) the room claims and marks
nothing: the host does, and an interrupted message is the host's to consume.
Cutting the forward off does not stop a claim the host already sent, so a mark
from here could land first and that claim re-open the message: the host is
told instead (`message_interrupted`), after the forward unwound.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from .. import errors
from ..contract import Adapter, Turn, adapter_failure
from ..link import RestClient
from ..policy import Policy
from ..runtime.parts import MESSAGE, AbortKind, ActiveTurn, Changes, RoomCounts
from ._envelope import INTERRUPTED, Envelope, envelope_for
from ._policy import BridgePolicy
from ._targets import Target

__all__ = ["Counters", "Forwarder"]

log = logging.getLogger("band_trio.bridge.forward")


@dataclass
class Counters(RoomCounts):
    """What one identity's forwards did (read by `GET /health`), beside what its rooms
    did (`RoomCounts`: catch-ups, cancels, drops, overflows), which the rooms write."""

    in_flight: int = 0
    delivered: int = 0
    failed: int = 0
    """Sends the target did not take (each attempt counts)."""


class Forwarder(Adapter):
    """The call a bridged identity's turns make (`RoomContext.call`), and its rooms'
    adapter: of that, only `on_room_left` is called (the target drops what it kept
    for the room: the A2A target's context)."""

    def __init__(
        self,
        agent_id: str,
        target: Target,
        *,
        rest: RestClient,
        limiter: trio.CapacityLimiter,
        policy: Policy,
        bridge_policy: BridgePolicy,
        changes: Changes,
        settles: bool,
        counters: Counters,
    ) -> None:
        self._agent_id = agent_id
        self._target = target
        self._rest = rest
        self._limiter = limiter
        self._policy = policy
        self._bridge_policy = bridge_policy
        self._changes = changes
        self._settles = settles
        self.counters = counters
        """Live: the rooms write their counts, the forwards the rest."""

    async def on_turn(self, turn: Turn) -> None:
        raise AssertionError("a bridged identity's turns forward (RoomContext.call)")

    async def on_room_left(self, room_id: str) -> None:
        await self._target.room_left(room_id)

    async def __call__(self, turn: ActiveTurn, view: Turn) -> None:
        """Forward the unit; raises `ForwardError` once the target refused it
        `forward_attempts` times in a row."""
        room_id = turn.message.room_id
        envelope = envelope_for(turn.event, self._agent_id, room_id, turn.wire)
        policy = self._bridge_policy
        delay = policy.retry_first
        try:
            for attempt in range(1, policy.forward_attempts + 1):
                failure = await self._send(envelope, turn, view)
                if failure is None:
                    return
                if turn.abort_kind is not None:  # it failed as its abort unwound it
                    await trio.lowlevel.checkpoint()  # raises the abort's Cancelled
                if attempt == policy.forward_attempts:
                    # what the room's error event says (the log has the target's words)
                    turn.explained = (
                        f"the bridge's target did not take it in {attempt} forward(s); "
                        "see the bridge's log"
                    )
                    raise errors.ForwardError(
                        f"the target did not take it in {attempt} forward(s): {failure}"
                    )
                log.info("room %s: %s %s; again in %gs", room_id, envelope.event_type,
                         failure, delay)  # fmt: skip
                with trio.move_on_after(delay):
                    await turn.draining.wait()
                if turn.draining.is_set():  # a graceful stop: no new send, the message left
                    turn.abort(AbortKind.SHUTDOWN, "stopping: the forward was waiting to retry")
                    await trio.lowlevel.checkpoint()  # raises the abort's Cancelled
                delay = min(delay * 2, policy.retry_max)
        except trio.Cancelled:
            interrupted = turn.abort_kind is AbortKind.INTERRUPT
            if interrupted and not turn.settles and turn.event == MESSAGE:
                await self._consume(turn)
            raise

    async def _send(self, envelope: Envelope, turn: ActiveTurn, view: Turn) -> str | None:
        """One call of the target under the global cap and the send's deadline: None
        once it took the envelope, else why not."""
        counters = self.counters
        within = self._bridge_policy.forward_deadline
        async with self._limiter:
            counters.in_flight += 1
            self._changes.notify()
            try:
                deadline = trio.current_time() + within
                turn.control.deadline = deadline  # a remote start gets the grace beyond it
                with trio.move_on_at(deadline) as timed:
                    try:
                        await self._target.forward(envelope, view)
                    except errors.ForwardError as exc:
                        return self._failed(envelope, turn, f"not forwarded: {exc}")
                    except BaseException as exc:  # a target's bug stays in this room
                        if not adapter_failure(exc):  # a cancel, or a real Ctrl-C: on up
                            raise
                        what = f"not forwarded: the target raised {type(exc).__name__}"
                        return self._failed(envelope, turn, what, exc)
                if timed.cancelled_caught:
                    return self._failed(envelope, turn, f"not forwarded within {within:g}s")
                counters.delivered += 1
            finally:
                counters.in_flight -= 1
                self._changes.notify()
        return None

    def _failed(
        self, envelope: Envelope, turn: ActiveTurn, why: str, raised: BaseException | None = None
    ) -> str:
        """A send the target did not take. One that failed as its turn's abort unwound
        it (a start cut by its grace) is no failed forward: the abort's kind decides."""
        room_id = turn.message.room_id
        if turn.abort_kind is not None:
            log.info("room %s: the aborted %s ended with: %s", room_id, envelope.event_type, why)
            return why
        self.counters.failed += 1
        log.warning("room %s: %s %s", room_id, envelope.event_type, why, exc_info=raised)
        return why

    async def _consume(self, turn: ActiveTurn) -> None:
        """An interrupt cut off the forward of a message the target settles: tell it
        (`message_interrupted`), shielded and bounded by the cleanup grace, so it
        consumes the message after its own claim. A target that answers that it
        consumes nothing (None: an older host) gets the bridge's `processed` mark on
        its claim. Told but not consumed, the message is left `processing`."""
        message = turn.message
        room_id = message.room_id
        with turn.control.cutoff.shield(self._policy.cleanup_grace) as scope:
            notice = envelope_for(INTERRUPTED, self._agent_id, room_id, {"id": message.id})
            told = await self._target.interrupted(notice)
            if told is None:
                try:
                    told = await self._rest.mark_processed(room_id, message.id) is not None
                except errors.PlatformError as exc:
                    log.info("room %s: interrupted %s not consumed: %s", room_id, message.id,
                             exc)  # fmt: skip
                    told = False
            if told:
                log.info("room %s: interrupted %s consumed", room_id, message.id)
            else:
                log.info("room %s: interrupted %s left to the target", room_id, message.id)
        if scope.cancelled_caught:
            log.info("room %s: interrupted %s not consumed within %gs", room_id, message.id,
                     self._policy.cleanup_grace)  # fmt: skip
