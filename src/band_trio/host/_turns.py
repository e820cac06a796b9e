"""The host's rooms: the runtime's, each forwarded message a turn on the platform's copy.

The envelope a forward carries is only a pointer. The host runs the adapter on
the message as the platform returns it — id, room, sender, content — read
from the agent's unprocessed list of that room (`GET .../messages`), never on
the envelope's copy: a message the platform does not hold for this agent in
that room, or holds differently, runs nothing. Messages are immutable on the
platform, so reading before the claim is reading what the claim claims, and a
refused envelope leaves no trace on the platform (no attempt is opened).

The rooms are the runtime's (`runtime.parts.Rooms`): one task per room, turns
of a room one at a time in arrival order, the same claim window, settle, hard
stop and shutdown as an agent's. Their rules say how the host differs: a room
never looks for work through `/next` (the bridge's catch-ups drive it: each
forward's request submits its unit, `_units`), and closing one only
forgets it. Each answer says what really happened (`HostOutcome`).

At most `BridgePolicy.host_rooms` rooms are kept, the least recently used idle
one dropped first (never one with a unit running or queued, or a mark
outstanding). A dropped room forgets its ledger and last abort; a message it
completed is still never run again, because the platform's unprocessed list no
longer holds it (`unknown`) — the read comes before the claim, which would
re-open a `processed` message.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import trio

from ..bridge import BridgePolicy
from ..contract import Cutoff, Message, Threads
from ..policy import Policy
from ..runtime.parts import (
    AbortKind,
    ActiveTurn,
    Ledger,
    Room,
    RoomContext,
    RoomRules,
    Rooms,
    Standing,
    inbound,
)
from ..wire import MessageCreated
from ._outcome import HostOutcome
from ._units import ConsumeUnit, TurnUnit, platform_copy, runnable

__all__ = ["HOST_RULES", "HostRooms", "Lifeline"]

log = logging.getLogger("band_trio.host")

HOST_RULES = RoomRules(catches_up=False, tells_left=False)
"""The host's rooms: fed by the forwards' requests, never by `/next`."""


class Lifeline:
    """The forward's request, as its unit sees it: once the request goes away, a turn
    already made is aborted as a stop (its remote work stopped, its message left
    `processing` for the replay); a unit not started yet is taken back; the lookup
    before it is cancelled (`scope`, entered by the request's handler)."""

    __slots__ = ("gone", "room", "scope", "unit")

    def __init__(self) -> None:
        self.scope = trio.CancelScope()
        self.unit: TurnUnit | None = None
        self.room: Room | None = None
        self.gone = False

    def attach(self, room: Room, unit: TurnUnit) -> None:
        self.room, self.unit = room, unit

    def cancelled(self) -> None:
        """The request was cancelled from outside (the server closing past its grace, a
        hard stop): the turn's abort is recorded before the cancel reaches its shielded
        waits, so a remote start gets the stop grace, not forever."""
        self._end(AbortKind.SHUTDOWN, "the host is stopping")

    def went_away(self) -> None:
        self.gone = True
        if self.unit is None:
            self.scope.cancel(reason="the forward went away before its turn")
            return
        log.info("room %s: the forward of %s went away; stopping its turn",
                 self.unit.message.room_id, self.unit.message.id)  # fmt: skip
        self._end(AbortKind.STOP, "the bridge cancelled the forward")

    def _end(self, kind: AbortKind, reason: str) -> None:
        unit, room = self.unit, self.room
        if unit is None or room is None:
            return
        if not unit.started and room.withdraw(unit):
            unit.done.set()  # never ran: nothing to answer
        else:
            unit.abort(kind, reason)


class HostRooms:
    """The host's rooms, bounded (`BridgePolicy.host_rooms`), and the turn path."""

    def __init__(self, policy: Policy, bridge_policy: BridgePolicy) -> None:
        self._policy = policy
        self._bridge_policy = bridge_policy
        self._rooms: Rooms | None = None
        self._ledgers: dict[str, Ledger] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._users: Counter[str] = Counter()
        """Requests of a room in progress (a room with one is never dropped)."""
        self._held: dict[str, str] = {}
        """Room → the message an aborted turn left `processing` on this host's claim
        (answered): what a later interrupt notice consumes with a mark alone."""
        self.turns = 0
        """Turns started (the adapter called or about to be)."""
        self.dropped = 0
        """Idle rooms forgotten to stay within `host_rooms`."""
        self.interrupts = 0
        """Interrupt notices received from the bridge (`interrupted`)."""
        self.cutoff = Cutoff()
        """Every shielded wait of the host's turns ends by it (`hard_stop` lowers it)."""
        self.threads = Threads(policy.adapter_threads)
        """The turns' worker threads (`run_in_thread`), abandoned ones counted, and their
        asyncio loop (`run_asyncio`)."""

    def bind(self, context: RoomContext) -> None:
        """Serve with `context` (the host's agent, adapter and REST client)."""
        self._rooms = Rooms(context, self._ledgers, shutdown_grace=0.0, what="host room")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The rooms' tasks, until `close` (what still runs then is cancelled)."""
        assert self._rooms is not None, "HostRooms.bind(context) first"
        try:
            await self._rooms.run(task_status=task_status)
        finally:  # a turn's asyncio task that ignored its cancel: cancelled again, waited for
            grace = min(self._policy.backend_stop_grace, self.cutoff.at - trio.current_time())
            await self.threads.aclose(max(0.0, grace))

    def close(self) -> None:
        if self._rooms is not None:
            self._rooms.close()

    def __len__(self) -> int:
        return len(self._rooms.current) if self._rooms is not None else 0

    def _turns_now(self) -> list[ActiveTurn]:
        hosted = self._rooms.hosted if self._rooms is not None else ()
        return [room.turn for room in hosted if room.turn is not None]

    def queued(self, room_id: str) -> list[str]:
        """The messages waiting in `room_id` behind the unit it runs now."""
        room = self._rooms.get(room_id) if self._rooms is not None else None
        return [] if room is None else room.waiting()

    def running(self, room_id: str) -> ActiveTurn | None:
        room = self._rooms.get(room_id) if self._rooms is not None else None
        return room.turn if room is not None else None

    @property
    def running_count(self) -> int:
        return len(self._turns_now())

    def running_turns(self) -> list[tuple[str, str]]:
        """(room, message) of every turn running now."""
        return [(turn.message.room_id, turn.message.id) for turn in self._turns_now()]

    def hard_stop(self, reason: str) -> None:
        """Every open turn aborted (its message left `processing`), and every shielded
        wait of the turns ended within `Policy.hard_stop_grace`."""
        self.cutoff.cut(trio.current_time() + self._policy.hard_stop_grace)
        for turn in self._turns_now():
            turn.abort(AbortKind.SHUTDOWN, reason)

    def _room(self, room_id: str) -> Room | None:
        """The room, served from now on if it was not (None: the host is closing)."""
        rooms = self._rooms
        assert rooms is not None, "HostRooms.bind(context) first"
        room = rooms.get(room_id) or rooms.add(room_id)
        if room is not None:
            self._recent[room_id] = None
            self._recent.move_to_end(room_id)
        return room

    def _trim(self) -> None:
        rooms = self._rooms
        if rooms is None:
            return
        excess = len(self._recent) - self._bridge_policy.host_rooms
        for room_id in list(self._recent):
            if excess <= 0:
                break
            room = rooms.get(room_id)
            if room is not None and not (room.idle and not self._users[room_id]):
                continue
            if room is not None and room.ledger.pending_marks():
                continue
            del self._recent[room_id]
            self._ledgers.pop(room_id, None)
            self._held.pop(room_id, None)
            rooms.remove(room_id, "the least recently used idle room (host_rooms)")
            self.dropped += 1
            excess -= 1

    async def turn(
        self, room_id: str, wire: MessageCreated, lifeline: Lifeline
    ) -> HostOutcome | None:
        """Run the envelope's message as the platform holds it; None once the forward
        went away (`lifeline`)."""
        room = self._room(room_id)
        if room is None:
            return HostOutcome.NOT_CLAIMED  # closing: nothing ran, worth asking again
        with self._using(room_id):
            return await self._turn(room, wire, lifeline)

    async def _turn(
        self, room: Room, wire: MessageCreated, lifeline: Lifeline
    ) -> HostOutcome | None:
        standing = room.ledger.standing(wire.id)
        if standing is Standing.COMPLETED:
            return HostOutcome.COMPLETED
        if standing is Standing.EXHAUSTED:
            return HostOutcome.EXHAUSTED
        if standing is Standing.ACK_PENDING:
            unit = TurnUnit(inbound(room.id, room.context.agent_id, wire).message, None, self._held)
        else:
            found, answer = await platform_copy(
                room, wire.id, self._bridge_policy.host_lookup_pages
            )
            if found is None:
                return answer
            if found.content != wire.content or found.sender_id != wire.sender_id:
                log.warning("room %s: the envelope of %s differs from the platform's "
                            "message: not run", room.id, wire.id)  # fmt: skip
                return HostOutcome.MISMATCH
            item, answer = runnable(room, found)
            if answer is not None:
                return answer
            unit = TurnUnit(item.message, item, self._held)
            self.turns += 1
        lifeline.attach(room, unit)
        room.submit(unit)
        try:
            await unit.done.wait()
        except BaseException:
            lifeline.cancelled()  # the request cancelled from outside: its unit too
            raise
        return None if lifeline.gone else unit.outcome

    async def interrupted(self, room_id: str, message_id: str, reason: str | None) -> HostOutcome:
        """The bridge cut the forward of `message_id` off for an interrupt: consume it
        (`processed`), after this host's claim of it, never before.

        The bridge cannot consume it itself without a race: the forward's request
        going away does not stop a claim the host already sent, and a claim that
        lands after `processed` re-opens the message (band-client-rest 0.0.51). So
        the consume is the claimer's, as in the runtime's turn (the abort recorded,
        the claim's answer awaited, then the mark): a turn of `message_id` still
        running is aborted as an interrupt now (the first abort wins: if the request's
        going away got there first it stays a stop), and in the room's order — once
        that turn has settled and its claim is answered — whatever is left is
        consumed (`ConsumeUnit`). The bridge never learns when the host's claim was
        answered, so it could not hold its cut back until then."""
        self.interrupts += 1
        room = self._room(room_id)
        if room is None:
            return HostOutcome.NOT_CLAIMED
        room.context.changes.notify()
        why = reason or "interrupted in the room"
        running = room.turn
        if running is not None and running.message.id == message_id:
            running.abort(AbortKind.INTERRUPT, why)
        known = Message(id=message_id, room_id=room_id, content="", sender_id="", sender_type="")
        unit = ConsumeUnit(known, why, self._held, self._bridge_policy.host_lookup_pages)
        with self._using(room_id):
            room.submit(unit)
            try:
                await unit.done.wait()
            except BaseException:
                room.withdraw(unit)
                raise
        return unit.outcome or HostOutcome.UNSETTLED

    @contextmanager
    def _using(self, room_id: str) -> Iterator[None]:
        """A request of `room_id` in progress: the room is not dropped meanwhile."""
        self._users[room_id] += 1
        try:
            yield
        finally:
            self._users[room_id] -= 1
            if not self._users[room_id]:
                del self._users[room_id]
            self._trim()
