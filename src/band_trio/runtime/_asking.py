"""`Turn.ask` on a room: post the question, wait in the turn's scope, withdraw it.

    ask
    ├── the room's lock             one question open per room; a second ask waits
    ├── the history, once           this process reads the room's earlier questions
    │                               back (a restart's late answers are recognised)
    ├── post the question           mentioning who may answer
    └── wait for the answer         the room routes it here (`Room.push`); a plain
                                    `Event.wait` in the turn's scope, so an interrupt
                                    or a stop ends it at its first hop; at the
                                    timeout: the default, and the room is told

A question that ends unanswered by an abort is withdrawn here; its note is
posted by the room once the turn has settled (never by the unwinding turn, whose
scope is cancelled, and never in a stopped room, which refuses posts).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import trio

from .. import errors
from .._question_format import STOPPED
from ..contract import ANYONE, Message, Question, TurnControl
from ._question_text import question_post, withdrawal_post
from ._questions import Desk, State

__all__ = ["ask_room", "withdrawal_reason"]

log = logging.getLogger("band_trio.runtime.questions")

Post = Callable[[str, Sequence[str]], Awaitable[str]]


async def ask_room(
    desk: Desk,
    question: Question,
    *,
    sender_id: str,
    control: TurnControl,
    post: Post,
    history: Callable[[], Awaitable[list[Message]]],
    agent_id: str,
) -> str:
    """Put `question` to the room and return the choice its answer picks."""
    async with desk.lock:
        if not desk.scanned:
            try:
                desk.learn(await history(), agent_id)
            except errors.PlatformError as exc:  # late answers of an earlier run may run
                log.warning("room %s: earlier questions not read back: %s", control.room_id, exc)
        mentions = (sender_id,) if ANYONE in question.answerers else question.answerers
        asked = desk.open(question, mentions)
        posted = False
        try:
            posted = True  # from here on it may have landed (an answer lost on the way)
            await post(question_post(asked.qid, question), mentions)
            with trio.move_on_after(question.timeout):
                await asked.answered.wait()
            if asked.answer is not None:
                return asked.answer
            reason = f'no answer within {question.timeout:g}s; went ahead with "{question.default}"'
            desk.withdraw(asked, reason, note=False)
            await post(withdrawal_post(asked.qid, reason), mentions)
            return question.default
        finally:
            if asked.state is State.OPEN:
                desk.withdraw(asked, withdrawal_reason(control), note=posted)


def withdrawal_reason(control: TurnControl) -> str:
    kind = control.abort_kind
    if kind == "interrupt":
        return "the work was interrupted"
    if kind in ("stop", "platform_stop"):
        return STOPPED
    if kind == "shutdown":
        return "the agent is stopping"
    if kind == "left":
        return "the agent left the room"
    return "the work ended without an answer"
