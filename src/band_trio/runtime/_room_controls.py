"""Messages a room consumes as controls: answers to its questions, and what it says back.

An answer (or a refused, surplus or late one: `_questions.Verdict`) is claimed
and marked `processed` like a turn's message, through the same settling, so it
is never a turn and never run again — by this process (the ledger) or a later
one (the platform). The note to its sender, and a withdrawn question's note, are
best effort: a note that does not land loses nothing but the words.
"""

from __future__ import annotations

import logging

from .. import errors
from ..contract import Message
from ..wire import MentionRef
from ._context import RoomContext
from ._ledger import Ledger
from ._question_text import closed_note, not_yours_note, withdrawal_post
from ._questions import Asked, State, Verdict
from ._settle import Outcome, settle
from ._turn_state import ActiveTurn

__all__ = ["consume_control", "note_for", "post_withdrawals"]

log = logging.getLogger("band_trio.runtime.questions")


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
