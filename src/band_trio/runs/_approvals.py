"""A run's questions as Hermes' approvals: `Turn.ask` → `approval.request`, answered over HTTP.

    turn.ask(question)                       approval.request    {"command", "description",
                                                                  "choices", "request_id",
                                                                  "approval_id", "timeout",
                                                                  "default"}
      status waiting_for_approval, `approval` = that event
    POST /v1/runs/{id}/approval {"choice"}   approval.responded  {"choice", "request_id",
                                                                  "resolved": 1}
    nobody answered by question.timeout      approval.responded  {"choice": default,
                                                                  "request_id", "resolved": 0,
                                                                  "timed_out": true}

Hermes' shape (NousResearch/hermes-agent `gateway/platforms/api_server_runs.py`
@ 005b4b7, `tools/approval_gateway_wait.py` @ 04eef15): the request carries the
approval data (`command`, `description`, `request_id` = `approval_id`) and the
`choices` a client may send back; a run is `waiting_for_approval` until it is
answered. Hermes' choices are always its own (`once`, `session`, `always`,
`deny`); here they are the adapter's, and Hermes' words are read onto a yes/no
pair (`pick`), so a Hermes client that answers `once` or `deny` works unchanged.

The wait is an `await` in the run's own task, under its cancel scope: a stop
during it ends it at once (the run ends `run.cancelled`, as for any stop), and
its deadline is the question's. One approval is pending per run at a time: a
second concurrent `ask` waits for the first to end (`trio.Lock` is fair: FIFO).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import trio

from ..contract import Question
from ._events import EventLog

__all__ = ["HERMES_ALIASES", "Approvals", "NotPending", "pick"]

HERMES_ALIASES = {"approve": "once", "approved": "once", "allow": "once"}
"""Hermes' `_APPROVAL_CHOICE_ALIASES`: what it reads as `once`."""
_HERMES_YES = frozenset({"once", "session", "always"})
_HERMES_NO = "deny"


def pick(choices: tuple[str, ...], given: str) -> str | None:
    """The adapter's choice that `given` names, or None.

    One of the adapter's own choices, ignoring case and surrounding spaces; else,
    where the adapter asked a yes/no pair (two choices), Hermes' words: `once`,
    `session` or `always` (and its aliases `approve`, `approved`, `allow`) are the
    first choice, `deny` the last. `session` and `always` grant no more than
    `once` here: an adapter's question is answered once, nothing is remembered."""
    word = given.strip().casefold()
    for choice in choices:
        if choice.casefold() == word:
            return choice
    if len(choices) == 2:
        word = HERMES_ALIASES.get(word, word)
        if word in _HERMES_YES:
            return choices[0]
        if word == _HERMES_NO:
            return choices[-1]
    return None


class NotPending(Exception):
    """No approval is pending (or not the one named): a 409."""


class _Pending:
    __slots__ = ("answered", "choice", "event", "question", "request_id")

    def __init__(self, question: Question, request_id: str) -> None:
        self.question = question
        self.request_id = request_id
        self.choice: str | None = None
        self.answered = trio.Event()
        self.event: dict[str, Any] = {}


class Approvals:
    """The approval desk of one run: at most one question pending, answered by `answer`."""

    __slots__ = ("_lock", "_on_waiting", "events", "pending")

    def __init__(self, events: EventLog, on_waiting: Callable[[bool], None]) -> None:
        self.events = events
        self._on_waiting = on_waiting
        """Told True when a question becomes pending and False when it ends: the run's
        status (`waiting_for_approval`)."""
        self._lock = trio.Lock()
        self.pending: _Pending | None = None

    @property
    def request(self) -> dict[str, Any] | None:
        """The pending `approval.request` event (the run status' `approval`), or None."""
        return self.pending.event if self.pending is not None else None

    async def ask(self, question: Question) -> str:
        """Put `question` as an `approval.request` and wait (in the caller's cancel
        scope) for `answer`, or `question.timeout`, then `question.default`."""
        async with self._lock:
            request_id = f"apr_{uuid.uuid4().hex}"
            pending = _Pending(question, request_id)
            pending.event = self.events.emit(
                "approval.request",
                command=question.text,
                description=question.text,
                choices=list(question.choices),
                request_id=request_id,
                approval_id=request_id,
                timeout=question.timeout,
                default=question.default,
            )
            self.pending = pending
            self._on_waiting(True)
            try:
                with trio.move_on_after(question.timeout):
                    await pending.answered.wait()
            finally:
                if self.pending is pending:  # timed out or cancelled: no longer answerable
                    self.pending = None
                    self._on_waiting(False)
            if pending.choice is not None:
                return pending.choice
            self.events.emit(
                "approval.responded",
                choice=question.default,
                request_id=request_id,
                resolved=0,
                timed_out=True,
            )
            return question.default

    def answer(self, choice: str, request_id: str | None = None) -> dict[str, Any]:
        """Answer the pending question with one of its choices (`pick` read it);
        the `approval.responded` event's fields. Raises `NotPending`."""
        pending = self.pending
        if pending is None or (request_id is not None and request_id != pending.request_id):
            raise NotPending
        assert choice in pending.question.choices
        pending.choice = choice
        self.pending = None
        self._on_waiting(False)
        pending.answered.set()
        fields = {"choice": choice, "request_id": pending.request_id, "resolved": 1}
        self.events.emit("approval.responded", **fields)
        return fields
