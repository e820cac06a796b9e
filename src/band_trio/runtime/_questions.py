"""A room's questions: the one open now, the recent ones, and what a reply is to them (sans-IO).

A reply is tied to a question by the room's order, which the room itself keeps
(so a restarted agent finds it again in the history):

| a message picking a choice, from ...  | while ...                   | is ...                   |
|---------------------------------------|-----------------------------|--------------------------|
| someone who may answer                | the question is open        | its answer               |
| anyone else (not an agent)            | the question is open        | refused, with a note     |
| someone who may answer                | answered, its turn runs on  | surplus, with a note     |
|                                       | or in the 30 s after        |                          |
| someone who may answer                | withdrawn, unanswered       | its late answer, a note  |
| anyone (or any other message)         |                             | an ordinary message      |

Each of the first four is consumed as a control (claimed, marked processed,
never a turn, never answered), and each question takes one late answer: a later
`approve` is a message like any other. See docs/discussion/questions-and-guidance.md.
"""

from __future__ import annotations

import enum
import math
import time
from collections import OrderedDict
from collections.abc import Sequence

import trio

from ..contract import Message, Question, chosen
from ._question_text import new_question_id, parse_question

__all__ = ["Asked", "Desk", "State", "Verdict"]

_MEMORY = 32
"""Questions a room remembers (a thousand asked keep the last 32)."""
_LATE_MEMORY = 256
SURPLUS_WINDOW = 30.0
"""Seconds after an answer during which another answer to the same question (a
double press, a burst) is consumed with a note, even once the asking turn ended:
without it, whether the second one ran as a turn would depend on a race."""


class State(enum.Enum):
    OPEN = "open"
    ANSWERED = "answered"
    WITHDRAWN = "withdrawn"
    CLOSED = "closed"
    """Withdrawn and its one late answer came (or answered and its turn ended)."""


class Asked:
    """One question put to the room (this process's, or one read back from history)."""

    __slots__ = (
        "answer", "answered", "answered_at", "choices", "live", "mentions", "qid", "question",
        "reason", "state",
    )  # fmt: skip

    def __init__(
        self,
        qid: str,
        choices: tuple[str, ...],
        question: Question | None,
        mentions: tuple[str, ...] = (),
    ) -> None:
        self.qid = qid
        self.mentions = mentions
        """Whom the question's post mentions (its withdrawal mentions them too)."""
        self.choices = choices
        self.question = question
        """The question as asked here (None: read back from the room's history)."""
        self.state = State.OPEN
        self.answer: str | None = None
        self.answered = trio.Event()
        self.live = question is not None
        """Its turn still runs: surplus answers are consumed, not run."""
        self.answered_at = -math.inf
        """When it was answered (monotonic clock): surplus answers are consumed for
        `SURPLUS_WINDOW` after it too, however soon the turn ends."""
        self.reason: str | None = None
        """Why it was withdrawn (a note the room is still to post, if any)."""


class Verdict(enum.Enum):
    ANSWER = "answer"
    NOT_YOURS = "not_yours"
    SURPLUS = "surplus"
    LATE = "late"


class Desk:
    """The questions of one room; one open at a time (`lock`)."""

    __slots__ = ("_allowed", "_late", "_records", "lock", "open_now", "scanned", "unposted")

    def __init__(self) -> None:
        self.lock = trio.Lock()
        """Held by the `ask` under way: a second one in the room waits for it."""
        self.open_now: Asked | None = None
        self._records: OrderedDict[str, Asked] = OrderedDict()
        self._allowed: dict[str, tuple[tuple[str, ...], bool]] = {}
        """Read back questions: qid → (the post's mentions, anyone may answer)."""
        self._late: OrderedDict[str, Asked] = OrderedDict()
        """Message ids the history shows are answers to questions no longer open."""
        self.scanned = False
        """Whether this process has read the room's earlier questions back."""
        self.unposted: list[Asked] = []
        """Withdrawn questions whose note the room is still to post."""

    @property
    def asked(self) -> bool:
        """Whether the room has questions to route replies to (most rooms: never)."""
        return bool(self._records)

    def open(self, question: Question, mentions: tuple[str, ...]) -> Asked:
        asked = Asked(new_question_id(), question.choices, question, mentions)
        self._remember(asked)
        self.open_now = asked
        return asked

    def answer(self, asked: Asked, choice: str) -> None:
        asked.state = State.ANSWERED
        asked.answered_at = time.monotonic()
        asked.answer = choice
        asked.answered.set()
        if self.open_now is asked:
            self.open_now = None

    def withdraw(self, asked: Asked, reason: str, *, note: bool) -> None:
        """The question ends unanswered; `note`: the room is still to be told."""
        if asked.state is not State.OPEN:
            return
        asked.state = State.WITHDRAWN
        asked.reason = reason
        if self.open_now is asked:
            self.open_now = None
        if note:
            self.unposted.append(asked)

    def turn_ended(self) -> None:
        """The asking turn ended: its answered questions take surplus answers only
        within `SURPLUS_WINDOW` of their answer from now on."""
        for asked in self._records.values():
            asked.live = False

    def classify(self, message: Message) -> tuple[Verdict, Asked, str] | None:
        """What `message` is to the room's questions (and the choice it picks), or
        None: an ordinary message. Records the answer it gives."""
        if message.sender_type == "Agent" or not self._records:
            return None
        late = self._late.pop(message.id, None)
        if late is not None:
            choice = chosen(message.content, late.choices)
            return Verdict.LATE, late, choice or "?"
        asked = self.open_now
        if asked is not None:
            choice = chosen(message.content, asked.choices)
            if choice is not None:
                if not self._may_answer(asked, message):
                    return Verdict.NOT_YOURS, asked, choice
                self.answer(asked, choice)
                return Verdict.ANSWER, asked, choice
        for earlier in reversed(self._records.values()):
            if earlier is asked or earlier.state is State.CLOSED:
                continue
            choice = chosen(message.content, earlier.choices)
            if choice is None or not self._may_answer(earlier, message):
                continue
            if earlier.state is State.ANSWERED:
                if earlier.live or time.monotonic() - earlier.answered_at < SURPLUS_WINDOW:
                    return Verdict.SURPLUS, earlier, choice
                earlier.state = State.CLOSED
                continue
            if earlier.state is State.WITHDRAWN:
                earlier.state = State.CLOSED  # one late answer each
                return Verdict.LATE, earlier, choice
        return None

    def _may_answer(self, asked: Asked, message: Message) -> bool:
        if asked.question is not None:
            return asked.question.may_answer(message.sender_id, message.sender_type)
        mentions, anyone = self._allowed.get(asked.qid, ((), False))
        return message.sender_id in mentions or anyone

    def _remember(self, asked: Asked) -> None:
        self._records[asked.qid] = asked
        while len(self._records) > _MEMORY:
            gone, _ = self._records.popitem(last=False)
            self._allowed.pop(gone, None)

    def learn(self, history: Sequence[Message], agent_id: str) -> None:
        """Read the room's earlier questions back from its history (oldest first), once
        per process: a question of ours not open here is withdrawn (a run of the agent
        that ended while it waited); the first answer after one, if the history shows
        it, is a late answer, consumed when it comes."""
        self.scanned = True
        read: OrderedDict[str, Asked] = OrderedDict()
        for message in history:
            if message.sender_id == agent_id:
                posted = parse_question(message.content)
                if posted is not None and posted.qid not in self._records:
                    asked = Asked(posted.qid, posted.choices, None)
                    asked.state = State.WITHDRAWN
                    read[posted.qid] = asked
                    self._allowed[posted.qid] = (message.mentions, posted.anyone)
                continue
            for asked in reversed(read.values()):
                if asked.state is not State.WITHDRAWN:
                    continue
                choice = chosen(message.content, asked.choices)
                if choice is not None and self._may_answer_read(asked, message):
                    asked.state = State.CLOSED
                    self._late[message.id] = asked
                    while len(self._late) > _LATE_MEMORY:
                        self._late.popitem(last=False)
                    break
        for asked in read.values():
            self._remember(asked)
        for asked in list(self._records.values()):  # ours (newer) come last again
            if asked.question is not None:
                self._records.move_to_end(asked.qid)

    def _may_answer_read(self, asked: Asked, message: Message) -> bool:
        if message.sender_type == "Agent":
            return False
        return self._may_answer(asked, message)
