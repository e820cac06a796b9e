"""The host's turns: the platform's copy of each message, claim → adapter → settle.

The envelope a forward carries is only a pointer. The host runs the adapter on
the message as the platform returns it — id, room, sender, content — read
from the agent's unprocessed list of that room (`GET .../messages`), never on
the envelope's copy: a message the platform does not hold for this agent in
that room, or holds differently, runs nothing. Messages are immutable on the
platform, so reading before the claim is reading what the claim claims, and a
refused envelope leaves no trace on the platform (no attempt is opened).

Each answer says what really happened (`HostOutcome`, `_host_outcome`).

Per room the host keeps a ledger (never twice), a serial lock, the last abort;
at most `BridgePolicy.host_rooms` rooms are kept, the least recently used idle
one dropped first (never one with a turn running or a mark outstanding). A
dropped room forgets its completed ids and last abort; a message it completed
is still never run again, because the platform's unprocessed list no longer
holds it (`unknown`) — the read comes before the claim, which would re-open a
`processed` message.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import trio

from .. import errors
from ..contract import Cutoff, LastAbort, Threads, ThreadStats
from ..link import RestClient
from ..policy import Policy
from ..runtime.parts import (
    AbortKind,
    ActiveTurn,
    Ledger,
    Outcome,
    Pages,
    RoomContext,
    Standing,
    inbound,
    run_turn,
    settle,
)
from ..wire import ChatMessage, MessageCreated
from ._host_outcome import SETTLED, HostOutcome
from ._policy import BridgePolicy

__all__ = ["HostRooms", "Lifeline", "platform_copy"]

log = logging.getLogger("band_trio.bridge.host")


async def platform_copy(
    rest: RestClient, room_id: str, message_id: str, pages: int
) -> ChatMessage | None:
    """The platform's copy of `message_id`, from the agent's unprocessed messages of
    `room_id` (oldest first, at most `pages` pages: the runtime's walk, which also
    ends at a repeated cursor); None if it is not there."""
    walk = Pages(pages, f"room {room_id}: the lookup of {message_id} (host_lookup_pages)")
    while walk.more:
        page = await rest.unprocessed(room_id, walk.cursor)
        for wire in page.data:
            if wire.id == message_id:
                return wire
        walk.advance(page.metadata)
    return None


class Lifeline:
    """The forward's request, as the turn path sees it: once it goes away, a turn
    already made is aborted as a stop (its remote work stopped, its message left
    `processing` for the replay); before that, the wait for the room or the read of
    the message is cancelled (`scope`, entered by the request's handler)."""

    __slots__ = ("gone", "scope", "turn")

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.turn: ActiveTurn | None = None
        self.gone = False

    def attach(self, turn: ActiveTurn) -> None:
        self.turn = turn

    def cancelled(self) -> None:
        """The request was cancelled from outside (the server closing past its grace, a
        hard stop): the turn's abort is recorded before the cancel reaches its shielded
        waits, so a remote start gets the stop grace, not forever."""
        if self.turn is not None:
            self.turn.abort(AbortKind.SHUTDOWN, "the host is stopping")

    def went_away(self) -> None:
        self.gone = True
        if self.turn is None:
            self.scope.cancel(reason="the forward went away before its turn")
        else:
            log.info(
                "room %s: the forward of %s went away; stopping its turn",
                self.turn.message.room_id,
                self.turn.message.id,
            )
            self.turn.abort(AbortKind.STOP, "the bridge cancelled the forward")


class _Room:
    """What the host keeps per room: the ledger, the serial lock, the last abort."""

    __slots__ = ("held", "last_abort", "ledger", "lock", "turn", "users")

    def __init__(self, policy: Policy) -> None:
        self.ledger = Ledger(max_attempts=policy.max_attempts, memory=policy.completed_memory)
        self.lock = trio.Lock()
        self.last_abort: LastAbort | None = None
        self.held: str | None = None
        """The message an aborted turn left `processing` on its own claim (answered):
        what a later interrupt notice consumes with a mark alone."""
        self.turn: ActiveTurn | None = None
        self.users = 0
        """Forwards of this room in progress (waiting for the lock or holding it)."""

    @property
    def idle(self) -> bool:
        return self.users == 0 and not self.ledger.pending_marks()


class HostRooms:
    """The host's rooms, bounded (`BridgePolicy.host_rooms`), and the turn path."""

    def __init__(self, policy: Policy, bridge_policy: BridgePolicy) -> None:
        self._policy = policy
        self._bridge_policy = bridge_policy
        self._rooms: OrderedDict[str, _Room] = OrderedDict()
        self.turns = 0
        """Turns started (the adapter called or about to be)."""
        self.dropped = 0
        """Idle rooms forgotten to stay within `host_rooms`."""
        self.interrupts = 0
        """Interrupt notices received from the bridge (`interrupted`)."""
        self._cutoff = Cutoff()
        """Every shielded wait of the host's turns ends by it (`hard_stop` lowers it)."""
        self._threads = Threads(policy.adapter_threads)
        """The turns' worker threads (`run_in_thread`), abandoned ones counted."""

    def __len__(self) -> int:
        return len(self._rooms)

    def running(self, room_id: str) -> ActiveTurn | None:
        room = self._rooms.get(room_id)
        return room.turn if room is not None else None

    @property
    def running_count(self) -> int:
        return sum(1 for room in self._rooms.values() if room.turn is not None)

    @property
    def threads(self) -> ThreadStats:
        return self._threads.stats

    def running_turns(self) -> list[tuple[str, str]]:
        """(room, message) of every turn running now."""
        return [
            (room_id, room.turn.message.id)
            for room_id, room in self._rooms.items()
            if room.turn is not None
        ]

    def hard_stop(self, reason: str) -> None:
        """Every open turn aborted (its message left `processing`), and every shielded
        wait of the turns ended within `Policy.hard_stop_grace`."""
        self._cutoff.cut(trio.current_time() + self._policy.hard_stop_grace)
        for room in self._rooms.values():
            if room.turn is not None:
                room.turn.abort(AbortKind.SHUTDOWN, reason)

    def _room(self, room_id: str) -> _Room:
        room = self._rooms.get(room_id)
        if room is None:
            room = self._rooms[room_id] = _Room(self._policy)
        self._rooms.move_to_end(room_id)
        return room

    def _trim(self) -> None:
        excess = len(self._rooms) - self._bridge_policy.host_rooms
        for room_id in [r for r, room in self._rooms.items() if room.idle][: max(excess, 0)]:
            del self._rooms[room_id]
            self.dropped += 1

    async def turn(
        self, ctx: RoomContext, room_id: str, wire: MessageCreated, lifeline: Lifeline
    ) -> HostOutcome | None:
        """Run the envelope's message as the platform holds it; None once aborted (the
        forward went away: `lifeline`)."""
        room = self._room(room_id)
        room.users += 1
        self._trim()
        try:
            async with room.lock:
                return await self._turn(ctx, room, room_id, wire, lifeline)
        finally:
            room.users -= 1
            self._trim()

    async def _turn(
        self,
        ctx: RoomContext,
        room: _Room,
        room_id: str,
        wire: MessageCreated,
        lifeline: Lifeline,
    ) -> HostOutcome | None:
        standing = room.ledger.standing(wire.id)
        if standing is Standing.COMPLETED:
            return HostOutcome.COMPLETED
        if standing is Standing.EXHAUSTED:
            return HostOutcome.EXHAUSTED
        if standing is Standing.ACK_PENDING:
            item = inbound(room_id, ctx.agent_id, wire)
            turn = ActiveTurn(
                item.message, self._policy, cutoff=self._cutoff, threads=self._threads
            )
            lifeline.attach(turn)
            turn.failure = room.ledger.pending_failure(wire.id)
            done = Outcome.SUCCEEDED if turn.failure is None else Outcome.FAILED
            if await settle(ctx.rest, ctx.policy, room.ledger, turn, done):
                return HostOutcome.SETTLED
            return HostOutcome.UNSETTLED
        try:
            found = await platform_copy(
                ctx.rest, room_id, wire.id, self._bridge_policy.host_lookup_pages
            )
        except errors.NotFoundError:
            found = None  # not a room of this agent
        except errors.PlatformError as exc:
            log.warning("room %s: cannot read %s from the platform: %s", room_id, wire.id, exc)
            return HostOutcome.NOT_CLAIMED
        if found is None:
            return HostOutcome.UNKNOWN
        if found.content != wire.content or found.sender_id != wire.sender_id:
            log.warning(
                "room %s: the envelope of %s differs from the platform's message: not run",
                room_id,
                wire.id,
            )
            return HostOutcome.MISMATCH
        item = inbound(room_id, ctx.agent_id, found)
        if item.message.sender_id == ctx.agent_id:
            return HostOutcome.SKIPPED
        if item.failed_attempts:  # the budget is the platform's: a restart spends none
            room.ledger.spent_on_platform(found.id, item.failed_attempts)
            if room.ledger.standing(found.id) is Standing.EXHAUSTED:
                return HostOutcome.EXHAUSTED
        turn = ActiveTurn(item.message, self._policy, cutoff=self._cutoff, threads=self._threads)
        lifeline.attach(turn)
        return await self._run(ctx, room, turn)

    async def _run(self, ctx: RoomContext, room: _Room, turn: ActiveTurn) -> HostOutcome | None:
        room.turn = turn
        self.turns += 1
        ctx.changes.notify()
        try:
            settled = await run_turn(ctx, room.ledger, turn, room.last_abort)
        finally:
            room.turn = None
            if turn.abort_kind is not None:
                room.last_abort = turn.abort_kind.note(turn.abort_reason, turn.message.id)
                consumed = room.ledger.standing(turn.message.id) is Standing.COMPLETED
                room.held = turn.message.id if turn.claimed and not consumed else None
            ctx.changes.notify()
        if turn.abort_kind is AbortKind.INTERRUPT:  # an interrupt notice: consumed on its claim
            return HostOutcome.CONSUMED if settled else HostOutcome.UNSETTLED
        if turn.abort_kind is not None or turn.outcome is None or turn.outcome is Outcome.ABORTED:
            return None
        outcome = SETTLED[turn.outcome]
        if outcome is HostOutcome.PROCESSED and not settled:
            return HostOutcome.UNSETTLED
        return outcome

    async def interrupted(
        self, ctx: RoomContext, room_id: str, message_id: str, reason: str | None
    ) -> HostOutcome:
        """The bridge cut the forward of `message_id` off for an interrupt: consume it
        (`processed`), after this host's claim of it, never before.

        The bridge cannot consume it itself without a race: the forward's request
        going away does not stop a claim the host already sent, and a claim that
        lands after `processed` re-opens the message (band-client-rest 0.0.51). So
        the consume is the claimer's, as in the runtime's turn (the abort recorded,
        the claim's answer awaited, then the mark): a turn of `message_id` still
        running is aborted as an interrupt now (the first abort wins: if the request's
        going away got there first it stays a stop), and under the room's lock —
        once that turn has settled and its claim is answered — whatever is left is
        consumed: a mark alone on a claim of ours (`_Room.held`), else the runtime's
        claim-then-mark, only for a message the platform still holds unprocessed
        (read first, as a turn does), so a `processed` one is never claimed again.
        Deferring the cut until the claim is answered (the bridge's
        `Forward.claiming`) cannot work across the process boundary: the bridge
        never learns when the host's claim was answered."""
        self.interrupts += 1
        ctx.changes.notify()
        room = self._room(room_id)
        room.users += 1
        self._trim()
        try:
            running = room.turn
            if running is not None and running.message.id == message_id:
                running.abort(AbortKind.INTERRUPT, reason or "interrupted in the room")
            async with room.lock:
                return await self._consume(ctx, room, room_id, message_id, reason)
        finally:
            room.users -= 1
            self._trim()

    async def _consume(
        self, ctx: RoomContext, room: _Room, room_id: str, message_id: str, reason: str | None
    ) -> HostOutcome:
        standing = room.ledger.standing(message_id)
        if standing is Standing.COMPLETED:
            return HostOutcome.COMPLETED  # consumed by its turn, or answered before
        if standing is Standing.EXHAUSTED:
            return HostOutcome.EXHAUSTED
        if standing is Standing.ACK_PENDING:  # it ran to the end: the next forward marks it
            return HostOutcome.UNSETTLED
        try:
            found = await platform_copy(
                ctx.rest, room_id, message_id, self._bridge_policy.host_lookup_pages
            )
        except errors.NotFoundError:
            found = None
        except errors.PlatformError as exc:
            log.warning("room %s: cannot read %s from the platform: %s", room_id, message_id, exc)
            return HostOutcome.NOT_CLAIMED
        if found is None:
            return HostOutcome.UNKNOWN  # processed already (or not ours): nothing to do
        item = inbound(room_id, ctx.agent_id, found)
        if item.message.sender_id == ctx.agent_id:
            return HostOutcome.SKIPPED
        if item.failed_attempts:  # the budget is the platform's: a restart spends none
            room.ledger.spent_on_platform(found.id, item.failed_attempts)
            if room.ledger.standing(found.id) is Standing.EXHAUSTED:
                return HostOutcome.EXHAUSTED
        turn = ActiveTurn(item.message, self._policy, cutoff=self._cutoff, threads=self._threads)
        turn.claimed = room.held == message_id
        turn.abort(AbortKind.INTERRUPT, reason or "interrupted in the room")
        room.held = None
        if await settle(ctx.rest, ctx.policy, room.ledger, turn, Outcome.ABORTED):
            log.info("room %s: interrupted %s consumed", room_id, message_id)
            return HostOutcome.CONSUMED
        return HostOutcome.UNSETTLED
