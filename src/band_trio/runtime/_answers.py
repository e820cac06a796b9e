"""A room's replies to its questions: routed to the waiting `ask`, consumed as controls.

`Answers` is the room's part that knows its questions (`_questions.Desk`): the
room asks it about each message before it queues one (`route`, on the push) and
before it runs one (`in_order`, from a `/next` pass), and tells it when a turn
ends (`after_turn`), when the room's topics are joined again (`rejoined`: an
answer posted while the agent was away is found in the history), and when it
drains.

An answer (or a refused, surplus or late one: `_questions.Verdict`) is claimed
and marked `processed` like a turn's message, through the same settling, so it
is never a turn and never run again — by this process (the ledger) or a later
one (the platform). The note to its sender, and a withdrawn question's note, are
best effort: a note that does not land loses nothing but the words.
"""

from __future__ import annotations

import logging

import trio

from .. import errors
from ..contract import Message
from ..wire import MentionRef
from ._context import RoomContext
from ._inbound import inbound
from ._ledger import Ledger, Standing
from ._question_text import closed_note, not_yours_note, parse_question, withdrawal_post
from ._questions import Asked, Desk, State, Verdict
from ._settle import Outcome, settle
from ._turn_state import ActiveTurn

__all__ = ["Answers", "consume_control", "note_for", "post_withdrawals"]

log = logging.getLogger("band_trio.runtime.questions")


class Answers:
    """The questions of one room and the replies consumed for them."""

    __slots__ = ("_consuming", "_ctx", "_ledger", "_nursery", "_waiting", "desk", "room_id")

    def __init__(self, room_id: str, ctx: RoomContext, ledger: Ledger) -> None:
        self.room_id = room_id
        self._ctx = ctx
        self._ledger = ledger
        self.desk = Desk()
        self._consuming: dict[str, str | None] = {}
        """Messages being consumed (id → the note for their sender): skipped on every
        path until their mark is settled."""
        self._waiting: list[Message] = []
        self._nursery: trio.Nursery | None = None

    def consuming(self, message_id: str) -> bool:
        return message_id in self._consuming

    def start(self, nursery: trio.Nursery) -> None:
        """The room's loop runs: consume here what came before it did."""
        self._nursery = nursery
        waiting, self._waiting = self._waiting, []
        for message in waiting:
            nursery.start_soon(self._consume, message)

    def stop(self) -> None:
        self._nursery = None

    def route(self, message: Message) -> bool:
        """A pushed message: True if it is a reply to a question (consumed beside the
        room's work, since the turn waiting for it may be the one in hand)."""
        if not self.desk.asked or self._ledger.standing(message.id) is not Standing.RUNNABLE:
            return False
        found = self.desk.classify(message)
        if found is None:
            return False
        self._consuming[message.id] = note_for(*found)
        self._ledger.ack_pending(message.id, claimed=False)  # never a turn, from now on
        if self._nursery is not None:
            self._nursery.start_soon(self._consume, message)
        else:
            self._waiting.append(message)
        return True

    async def read_back(self) -> None:
        """Before a replayed turn (an earlier run may have died asking): read the
        room's earlier questions back from its history, once per process, so that an
        answer to one starts no turn even if the replay does not ask again."""
        if self.desk.scanned:
            return
        ctx = self._ctx
        listed = None
        with trio.move_on_after(ctx.policy.settle_grace):  # the replay waits for it
            try:
                listed = await ctx.rest.history(self.room_id)
            except errors.PlatformError as exc:
                log.info("room %s: earlier questions not read back: %s", self.room_id, exc)
        if listed is None:
            return
        history = [inbound(self.room_id, ctx.agent_id, wire).message for wire in listed]
        self.desk.learn(history, ctx.agent_id)

    async def in_order(self, message: Message) -> bool | None:
        """A message about to run: None if it is no reply to a question, else consumed
        here (a late answer, in the room's order); whether its state moved on."""
        found = self.desk.classify(message) if self.desk.asked else None
        if found is None:
            return None
        return await consume_control(self._ctx, self._ledger, message, note_for(*found))

    async def _consume(self, message: Message) -> None:
        try:
            await consume_control(self._ctx, self._ledger, message, self._consuming[message.id])
        finally:
            del self._consuming[message.id]
            self._ctx.changes.notify()

    def after_turn(self, *, stopped: bool) -> None:
        """The turn's questions take no more answers; the room is told of those it
        withdrew, unless it is `stopped` (the platform refuses its posts: the replay
        asks again)."""
        desk = self.desk
        desk.turn_ended()
        if not desk.unposted:
            return
        withdrawn, desk.unposted = desk.unposted, []
        if self._nursery is not None and not stopped:
            self._nursery.start_soon(post_withdrawals, self._ctx, self.room_id, withdrawn)

    def rejoined(self) -> None:
        """The room's topics were joined again: an answer to the open question posted
        while no connection was up was never pushed; look for it in the history."""
        if self.desk.open_now is not None and self._nursery is not None:
            self._nursery.start_soon(self._look_back, self.desk.open_now)

    async def _look_back(self, asked: Asked) -> None:
        ctx = self._ctx
        try:
            listed = await ctx.rest.history(self.room_id)
        except errors.PlatformError as exc:
            log.info("room %s: answers not looked for after a reconnect: %s", self.room_id, exc)
            return
        seen = False
        for wire in listed:
            item = inbound(self.room_id, ctx.agent_id, wire)
            message = item.message
            if message.sender_id == ctx.agent_id:
                posted = parse_question(message.content)
                seen = seen or (posted is not None and posted.qid == asked.qid)
                continue
            if seen and not item.processed and message.id not in self._consuming:
                self.route(message)


def note_for(verdict: Verdict, asked: Asked, choice: str) -> str | None:
    """What the sender of a consumed reply is told (None: an answer, told by the work)."""
    if verdict is Verdict.ANSWER:
        return None
    if verdict is Verdict.NOT_YOURS:
        return not_yours_note(asked.qid, choice)
    if verdict is Verdict.SURPLUS:
        return closed_note(asked.qid, f'answered already ("{asked.answer}")', choice)
    if asked.reason is not None:
        return closed_note(asked.qid, f"withdrawn ({asked.reason})", choice)
    return closed_note(asked.qid, "withdrawn", choice)


async def consume_control(
    ctx: RoomContext, ledger: Ledger, message: Message, note: str | None
) -> bool:
    """Claim and mark `message` processed (ack-pending if the mark does not land), then
    post `note` to its sender. True if its platform state moved on."""
    turn = ActiveTurn(message, ctx.policy, cutoff=ctx.cutoff, threads=ctx.threads)
    turn.claimed = False  # the mark claims first: no attempt of ours is open
    moved = await settle(ctx.rest, ctx.policy, ledger, turn, Outcome.SUCCEEDED)
    if note is not None:
        await _say(ctx, message.room_id, note, (message.sender_id,))
    return moved


async def post_withdrawals(ctx: RoomContext, room_id: str, withdrawn: list[Asked]) -> None:
    """Tell the room each question in `withdrawn` is withdrawn, and why."""
    for asked in withdrawn:
        if asked.state is State.WITHDRAWN or asked.state is State.CLOSED:
            await _say(ctx, room_id, withdrawal_post(asked.qid, asked.reason or "withdrawn"),
                       asked.mentions)  # fmt: skip


async def _say(ctx: RoomContext, room_id: str, content: str, mentions: tuple[str, ...]) -> None:
    try:
        await ctx.rest.post_message(room_id, content, [MentionRef(id=m) for m in mentions])
    except errors.PlatformError as exc:
        log.info("room %s: note not posted: %s", room_id, exc)
