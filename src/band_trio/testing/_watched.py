"""The port under the adapter's `Turn`, watched: its questions and the guidance it took.

`Observed` hands the adapter a `Turn` equal to the runtime's (the same message,
control and last abort) over a port that passes every call through and
records two things the room cannot show: when a `Turn.ask` wait began and how
and when it ended (the moment the `Cancelled` of an interrupt left the wait),
and which offered messages the turn took (`Turn.take_guidance`), with how many
posts the turn had made by then. The kit's question and guidance probes read
them; nothing here changes what a call does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import trio

from ..contract import Message, Participant, Question, Turn, TurnPort

__all__ = ["AskRecord", "TakeRecord", "Watch", "watched_turn"]

AskEnding = Literal["answered", "cancelled", "raised"]


@dataclass(slots=True)
class AskRecord:
    """One `Turn.ask`, as the port saw it."""

    question: Question
    asked: float
    """`time.perf_counter()` when the port was asked (before the question's post)."""
    ended: float | None = None
    """When the wait ended (for an abort: when its `Cancelled` left the port)."""
    ending: AskEnding | None = None
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class TakeRecord:
    """One `Turn.take_guidance` that took something."""

    messages: tuple[Message, ...]
    at: float
    posted: int
    """How many posts the turn had made when it took them (`Turn.posted`)."""


@dataclass(slots=True)
class Watch:
    """What the watched port saw of one turn."""

    asks: list[AskRecord] = field(default_factory=list)
    takes: list[TakeRecord] = field(default_factory=list)

    @property
    def taken(self) -> list[Message]:
        return [message for take in self.takes for message in take.messages]


class _WatchedPort:
    """A `TurnPort` that passes every call to `inner` and records asks and takes."""

    __slots__ = ("_changed", "_inner", "_turn", "_watch")

    def __init__(
        self, inner: TurnPort, turn: Turn, watch: Watch, changed: Callable[[], None]
    ) -> None:
        self._inner = inner
        self._turn = turn
        self._watch = watch
        self._changed = changed

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        return await self._inner.post_message(content, mentions)

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        return await self._inner.post_event(content, message_type, metadata)

    async def history(self) -> list[Message]:
        return await self._inner.history()

    async def participants(self) -> list[Participant]:
        return await self._inner.participants()

    async def ask(self, question: Question) -> str:
        record = AskRecord(question, time.perf_counter())
        self._watch.asks.append(record)
        self._changed()
        ending: AskEnding = "raised"
        try:
            record.answer = await self._inner.ask(question)
            ending = "answered"
            return record.answer
        except trio.Cancelled:
            ending = "cancelled"
            raise
        finally:
            record.ended, record.ending = time.perf_counter(), ending
            self._changed()

    def take_guidance(self) -> tuple[Message, ...]:
        taken = self._inner.take_guidance()
        if taken:
            take = TakeRecord(taken, time.perf_counter(), self._turn.posted)
            self._watch.takes.append(take)
            self._changed()
        return taken

    async def wait_guidance(self) -> None:
        await self._inner.wait_guidance()


def watched_turn(turn: Turn, watch: Watch, changed: Callable[[], None]) -> Turn:
    """A `Turn` like `turn` whose port is watched into `watch` (`changed` is called at
    each record). It shares `turn`'s control: its remote works, stops, posts and
    deadline are the same."""
    return turn.over(lambda port: _WatchedPort(port, turn, watch, changed))
