"""What the host hands its rooms: a forwarded message's turn, an interrupt's consume.

The host's rooms are the runtime's (`runtime.Room`, `_turns`), fed by their
owner instead of `/next`: each forward's request submits a unit (`Room.submit`),
which runs in the room's order, in the room's task, and tells the request how it
ended (`done`, `outcome`). A unit is the host's own step around the runtime's:

* `TurnUnit` — the platform's copy of the message, read by the request first:
  the runtime's turn (claim → adapter → settle), or only the final mark again
  for a message whose turn ran here and whose mark did not land;
* `ConsumeUnit` — an interrupt notice for a message whose turn is over (or
  never ran here): consumed (`processed`) on this host's own claim if an
  aborted turn left it `processing`, else claimed first, and only while the
  platform still holds it unprocessed.
"""

from __future__ import annotations

import logging

import trio

from .. import errors
from ..contract import Message
from ..runtime.parts import (
    AbortKind,
    ActiveTurn,
    Inbound,
    Outcome,
    Pages,
    Room,
    Standing,
    inbound,
    settle,
)
from ..wire import ChatMessage
from ._outcome import SETTLED, HostOutcome

__all__ = ["ConsumeUnit", "TurnUnit", "platform_copy"]

log = logging.getLogger("band_trio.host")


async def platform_copy(
    room: Room, message_id: str, pages: int
) -> tuple[ChatMessage | None, HostOutcome | None]:
    """The platform's copy of `message_id`, from the agent's unprocessed messages of
    the room (oldest first, at most `pages` pages: the runtime's walk, which also
    ends at a repeated cursor); or, when there is none to run, what to answer."""
    rest = room.context.rest
    walk = Pages(pages, f"room {room.id}: the lookup of {message_id} (host_lookup_pages)")
    try:
        while walk.more:
            page = await rest.unprocessed(room.id, walk.cursor)
            for wire in page.data:
                if wire.id == message_id:
                    return wire, None
            walk.advance(page.metadata)
    except errors.NotFoundError:
        return None, HostOutcome.UNKNOWN  # not a room of this agent
    except errors.PlatformError as exc:
        log.warning("room %s: cannot read %s from the platform: %s", room.id, message_id, exc)
        return None, HostOutcome.NOT_CLAIMED
    return None, HostOutcome.UNKNOWN


def runnable(room: Room, found: ChatMessage) -> tuple[Inbound, HostOutcome | None]:
    """The platform's copy as a unit, or what to answer when it is not one to run."""
    item = inbound(room.id, room.context.agent_id, found)
    if item.message.sender_id == room.context.agent_id:
        return item, HostOutcome.SKIPPED
    if item.failed_attempts:  # the budget is the platform's: a restart spends none
        room.ledger.spent_on_platform(found.id, item.failed_attempts)
        if room.ledger.standing(found.id) is Standing.EXHAUSTED:
            return item, HostOutcome.EXHAUSTED
    return item, None


class _Unit:
    """A unit of the host's, as its request waits for it."""

    def __init__(self, message: Message) -> None:
        self.message = message
        self.started = False
        self.done = trio.Event()
        self.outcome: HostOutcome | None = None
        """What the request answers (None: nothing, the request went away)."""

    async def run(self, room: Room) -> bool:
        self.started = True
        try:
            self.outcome, moved = await self._run(room)
            return moved
        finally:
            self.done.set()

    async def _run(self, room: Room) -> tuple[HostOutcome | None, bool]:
        raise NotImplementedError


class TurnUnit(_Unit):
    """One forwarded message: its turn on the platform's copy (`item`), or only its
    final mark again (`item` None: the ledger says its turn ran here)."""

    def __init__(self, message: Message, item: Inbound | None, held: dict[str, str]) -> None:
        super().__init__(message)
        self._item = item
        self._held = held
        self.turn: ActiveTurn | None = None
        """The turn, from the moment it exists (what the request's lifeline aborts)."""
        self.aborted: tuple[AbortKind, str] | None = None
        """An abort that came before the turn existed (the request went away)."""

    def abort(self, kind: AbortKind, reason: str) -> None:
        if self.turn is not None:
            self.turn.abort(kind, reason)
        elif self.aborted is None:
            self.aborted = (kind, reason)

    def _made(self, turn: ActiveTurn) -> None:
        self.turn = turn
        if self.aborted is not None:
            turn.abort(*self.aborted)

    async def _run(self, room: Room) -> tuple[HostOutcome | None, bool]:
        message = self.message
        standing = room.ledger.standing(message.id)  # a unit before it may have moved it
        if standing is Standing.COMPLETED:
            return HostOutcome.COMPLETED, False
        if standing is Standing.EXHAUSTED:
            return HostOutcome.EXHAUSTED, False
        if standing is Standing.ACK_PENDING or self._item is None:
            moved = await room.settle_pending(message)
            return (HostOutcome.SETTLED if moved else HostOutcome.UNSETTLED), moved
        moved = await room.run_turn(self._item, settles=True, made=self._made)
        turn = self.turn
        assert turn is not None
        if turn.abort_kind is not None:
            consumed = room.ledger.standing(message.id) is Standing.COMPLETED
            if turn.claimed and not consumed:  # left `processing` on our claim
                self._held[room.id] = message.id
            else:
                self._held.pop(room.id, None)
        return _answer(turn, moved), moved


def _answer(turn: ActiveTurn, settled: bool) -> HostOutcome | None:
    if turn.abort_kind is AbortKind.INTERRUPT:  # an interrupt notice: consumed on its claim
        return HostOutcome.CONSUMED if settled else HostOutcome.UNSETTLED
    if turn.abort_kind is not None or turn.outcome is None or turn.outcome is Outcome.ABORTED:
        return None
    outcome = SETTLED[turn.outcome]
    if outcome is HostOutcome.PROCESSED and not settled:
        return HostOutcome.UNSETTLED
    return outcome


class ConsumeUnit(_Unit):
    """An interrupt notice for `message`: consume what is left of it, after every
    turn of it here has settled (it runs in the room's order)."""

    def __init__(self, message: Message, reason: str, held: dict[str, str], pages: int) -> None:
        super().__init__(message)
        self._reason = reason
        self._held = held
        self._pages = pages

    async def _run(self, room: Room) -> tuple[HostOutcome | None, bool]:
        message_id = self.message.id
        standing = room.ledger.standing(message_id)
        if standing is Standing.COMPLETED:
            return HostOutcome.COMPLETED, False  # consumed by its turn, or answered before
        if standing is Standing.EXHAUSTED:
            return HostOutcome.EXHAUSTED, False
        if standing is Standing.ACK_PENDING:  # it ran to the end: the next forward marks it
            return HostOutcome.UNSETTLED, False
        found, answer = await platform_copy(room, message_id, self._pages)
        if found is None:
            return answer, False  # processed already (or not ours): nothing to do
        item, answer = runnable(room, found)
        if answer is not None:
            return answer, False
        ctx = room.context
        turn = ActiveTurn(item.message, ctx.policy, cutoff=ctx.cutoff, threads=ctx.threads)
        turn.claimed = self._held.pop(room.id, None) == message_id
        turn.abort(AbortKind.INTERRUPT, self._reason)
        if await settle(ctx.rest, ctx.policy, room.ledger, turn, Outcome.ABORTED):
            log.info("room %s: interrupted %s consumed", room.id, message_id)
            return HostOutcome.CONSUMED, True
        return HostOutcome.UNSETTLED, False
