"""What the agent says in a room about its questions (the format itself is
`band_trio._question_format`, shared with the console): the question, its
withdrawal, and the notes to people whose replies were not used."""

from __future__ import annotations

from .._question_format import new_question_id, parse_question
from .._question_format import question_post as _post
from .._question_format import withdrawal_post as withdrawal_post
from ..contract import ANYONE, Question

__all__ = [
    "closed_note",
    "new_question_id",
    "not_yours_note",
    "parse_question",
    "question_post",
    "withdrawal_post",
]


def question_post(qid: str, question: Question) -> str:
    return _post(qid, question.text, question.choices, anyone=ANYONE in question.answerers)


def closed_note(qid: str, state: str, choice: str) -> str:
    """To someone who answered a question no longer open (`state`: why)."""
    return f'Question {qid} is {state}: your "{choice}" was not used.'


def not_yours_note(qid: str, choice: str) -> str:
    return f'Question {qid} is for the people it mentions: your "{choice}" was not used.'
