"""A question a turn puts to the people in its room (`Turn.ask`), and how an answer reads.

The question is plain data: who serves it (the runtime posts it to the room and
routes the answer back; the runs API, later, as an approval request) is the
turn port's business. What counts as an answer is defined here, once, so every
port, the console and the docs read a reply the same way: the first word after
any leading mentions, case-insensitive, trailing punctuation ignored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .._question_format import CHOICE, MAX_CHOICES, chosen, chosen_word

__all__ = ["ANYONE", "MAX_CHOICES", "MAX_QUESTION_CHARS", "Question", "chosen"]

ANYONE = "*"
"""In `Turn.ask(answerers=...)`: any participant who is not an agent may answer."""

MAX_QUESTION_CHARS = 4000
"""A question longer than this is refused (`ValueError`): it is a question, not a report."""


@dataclass(frozen=True, slots=True)
class Question:
    """What a turn asks, validated (`Question.make`), as its port receives it."""

    text: str
    choices: tuple[str, ...]
    """The answers, as given: `Turn.ask` returns one of these, exactly."""
    answerers: tuple[str, ...]
    """Participant ids who may answer, or `(ANYONE,)`."""
    timeout: float
    """Seconds to wait for an answer before taking `default`."""
    default: str
    """The choice taken at the deadline (one of `choices`)."""

    @classmethod
    def make(
        cls,
        text: str,
        choices: Sequence[str],
        *,
        answerers: Sequence[str],
        timeout: float,
        default: str | None,
    ) -> Question:
        """Validate, with errors that say what to change (`ValueError`)."""
        if isinstance(choices, str):
            raise ValueError("choices is a sequence of words, not one string")
        text = text.strip()
        if not text:
            raise ValueError("a question needs non-blank text")
        if len(text) > MAX_QUESTION_CHARS:
            raise ValueError(f"a question is at most {MAX_QUESTION_CHARS} characters")
        picked = tuple(choices)
        if not 2 <= len(picked) <= MAX_CHOICES:
            raise ValueError(f"a question needs 2 to {MAX_CHOICES} choices, got {len(picked)}")
        for choice in picked:
            if not isinstance(choice, str) or not CHOICE.fullmatch(choice):
                raise ValueError(
                    f"choice {choice!r} is not one word of at most 32 characters "
                    "(no spaces or commas, not starting with @)"
                )
        if len({c.casefold() for c in picked}) != len(picked):
            raise ValueError("choices must differ, ignoring case")
        who = tuple(answerers)
        if not who or not all(isinstance(w, str) and w for w in who):
            raise ValueError("answerers must name at least one participant id (or ANYONE)")
        if math.isnan(timeout) or timeout <= 0:
            raise ValueError("timeout must be a positive number of seconds")
        chosen_default = picked[-1] if default is None else chosen_word(default, picked)
        if chosen_default is None:
            raise ValueError(f"default {default!r} is not one of the choices {picked}")
        return cls(text, picked, who, timeout, chosen_default)

    def may_answer(self, sender_id: str, sender_type: str) -> bool:
        """Whether a participant may answer: named, or anyone who is not an agent."""
        if sender_id in self.answerers:
            return True
        return ANYONE in self.answerers and sender_type != "Agent"
