"""How a question reads in a room, and how a reply picks one of its choices.

One definition for everything that writes or reads them: the contract (`chosen`,
and what a valid choice is), the runtime (the agent's posts, and reading them
back from a room's history after a restart) and the embedded platform's console
(its question cards and buttons). The agent's posts carry only content and
mentions, so the question's identity and choices live in its first line:

    Question q-3f2a9c1b — reply with one of: approve, deny
    (blank line)
    the question's text

with ` (anyone may answer)` after the id when anyone who is not an agent may
answer (otherwise: the people the post mentions). A withdrawal starts
`Question q-3f2a9c1b withdrawn: ` and gives the reason. docs/how-to/ask-the-room.md
describes it to users ("The wire").
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "CHOICE",
    "MAX_CHOICES",
    "STOPPED",
    "PostedQuestion",
    "chosen",
    "chosen_word",
    "new_question_id",
    "parse_question",
    "parse_withdrawal",
    "question_post",
    "withdrawal_post",
]

MAX_CHOICES = 8
CHOICE = re.compile(r"[^\s,@][^\s,]{0,31}")
"""One word, at most 32 characters, no comma (the post lists choices with commas) and
not starting with `@` (a reply's leading mentions are skipped before the choice)."""

STOPPED = "the work was stopped"
"""Why a stop withdrew a question; a stopped room refuses posts, so the console says
it for the agent."""

_HEADER = re.compile(
    rf"Question (q-[0-9a-f]{{8}})( \(anyone may answer\))? — reply with one of: "
    rf"({CHOICE.pattern}(?:, {CHOICE.pattern}){{1,{MAX_CHOICES - 1}}})"
)
_WITHDRAWN = re.compile(r"Question (q-[0-9a-f]{8}) withdrawn\b:?[ \t]*")
_TRAILING = ".,;:!?)\"'"
_FIRST_WORD = re.compile(r"\s*(?:@\S*\s+)*([^@\s]\S{0,63})(?:\s|$)")
"""The first word after any leading mentions (a longer word is no choice)."""
_LOOK_AT = 4096
"""Only a reply's head is read: this runs on the websocket reader's path for every
message of a room with questions, and an 8 MiB message took it a second whole."""


def new_question_id() -> str:
    return f"q-{secrets.token_hex(4)}"


def question_post(qid: str, text: str, choices: Sequence[str], *, anyone: bool) -> str:
    header = f"Question {qid}{' (anyone may answer)' if anyone else ''}"
    return f"{header} — reply with one of: {', '.join(choices)}\n\n{text}"


def withdrawal_post(qid: str, reason: str) -> str:
    return f"Question {qid} withdrawn: {reason}."


@dataclass(frozen=True, slots=True)
class PostedQuestion:
    """A question read back from an agent's post."""

    qid: str
    choices: tuple[str, ...]
    anyone: bool
    text: str


def parse_question(content: str) -> PostedQuestion | None:
    """The question a post is, or None (a post that is not exactly one is a message)."""
    head, _, rest = content.partition("\n")
    found = _HEADER.fullmatch(head)
    if found is None:
        return None
    choices = tuple(found[3].split(", "))
    if len({c.casefold() for c in choices}) != len(choices):
        return None
    return PostedQuestion(found[1], choices, found[2] is not None, rest.strip("\n"))


def parse_withdrawal(content: str) -> tuple[str, str] | None:
    """(the question's id, the reason) of a withdrawal post, or None."""
    found = _WITHDRAWN.match(content)
    if found is None:
        return None
    reason = content[found.end() :].strip()
    return found[1], reason.removesuffix(".")


def chosen(content: str, choices: Sequence[str]) -> str | None:
    """The choice a reply picks (as given in `choices`), or None.

    The first word after any leading mentions (`@handle`), case-insensitive, with
    trailing punctuation ignored: `@agent Approve.` picks `approve`."""
    first = _FIRST_WORD.match(content[:_LOOK_AT])
    if first is None:
        return None
    return chosen_word(first[1].rstrip(_TRAILING), choices)


def chosen_word(word: str, choices: Sequence[str]) -> str | None:
    folded = word.casefold()
    for choice in choices:
        if choice.casefold() == folded:
            return choice
    return None
