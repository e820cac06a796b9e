"""How a question, its withdrawal and the agent's notes read in the room.

The agent's posts carry only content and mentions, so the question's identity
and its choices live in its first line, where a person reads them and where a
restarted agent (reading the room's history) and the console find them again:

    Question q-3f2a9c1b — reply with one of: approve, deny
    (blank line)
    the question's text

`(anyone may answer)` after the id says the question is open to everyone who is
not an agent; otherwise the post's mentions are who may answer. A withdrawal
starts `Question q-… withdrawn`. These lines are the wire format the console
parses (docs/reference/questions.md): change them together.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from ..contract import ANYONE, Question

__all__ = [
    "QUESTION_ID",
    "Posted",
    "closed_note",
    "new_question_id",
    "not_yours_note",
    "parse_question",
    "parse_withdrawal",
    "question_post",
    "withdrawal_post",
]

QUESTION_ID = re.compile(r"q-[0-9a-f]{8}")
_HEADER = re.compile(
    r"Question (q-[0-9a-f]{8})( \(anyone may answer\))? — reply with one of: "
    r"([^\s,]+(?:, [^\s,]+)*)"
)
_WITHDRAWN = re.compile(r"Question (q-[0-9a-f]{8}) withdrawn\b")


def new_question_id() -> str:
    return f"q-{secrets.token_hex(4)}"


def question_post(qid: str, question: Question) -> str:
    anyone = " (anyone may answer)" if ANYONE in question.answerers else ""
    choices = ", ".join(question.choices)
    return f"Question {qid}{anyone} — reply with one of: {choices}\n\n{question.text}"


def withdrawal_post(qid: str, reason: str) -> str:
    return f"Question {qid} withdrawn: {reason}."


def closed_note(qid: str, state: str, choice: str) -> str:
    """To someone who answered a question no longer open (`state`: why)."""
    return f'Question {qid} is {state}: your "{choice}" was not used.'


def not_yours_note(qid: str, choice: str) -> str:
    return f'Question {qid} is for the people it mentions: your "{choice}" was not used.'


@dataclass(frozen=True, slots=True)
class Posted:
    """A question read back from a post of the agent's."""

    qid: str
    choices: tuple[str, ...]
    anyone: bool


def parse_question(content: str) -> Posted | None:
    header = _HEADER.fullmatch(content.partition("\n")[0])
    if header is None:
        return None
    return Posted(header[1], tuple(header[3].split(", ")), header[2] is not None)


def parse_withdrawal(content: str) -> str | None:
    found = _WITHDRAWN.match(content)
    return None if found is None else found[1]
