"""The adapter under test, watched from outside: what happened to each of its turns.

The conformance kit wraps the author's adapter in `Observed`, which passes
every call through unchanged and records, per turn, when it was entered, how
it ended, the `Turn` it was given (its remote works and stops, its last
abort), its questions and the guidance it took (`_watched`), and when
`on_room_left` ran. Nothing here changes what the adapter does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Literal

import trio

from ..contract import Adapter, AgentInfo, Turn
from ._watched import Watch, watched_turn

__all__ = ["Observed", "TurnRecord"]

Ending = Literal["returned", "raised", "cancelled"]


@dataclass(slots=True)
class TurnRecord:
    """One call of `on_turn`, as seen from outside the adapter."""

    message_id: str
    content: str
    turn: Turn
    entered: float
    """`time.perf_counter()` when the adapter was entered."""
    ended: float | None = None
    ending: Ending | None = None
    error: str | None = None
    watch: Watch = field(default_factory=Watch)
    """Its `Turn.ask` waits and the guidance it took, as its port saw them."""

    @property
    def running(self) -> bool:
        return self.ending is None


@dataclass(slots=True)
class RoomLeft:
    room_id: str
    at: float


def cancelled_only(exc: BaseException) -> bool:
    """Whether `exc` is `trio.Cancelled`, or a group holding nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(cancelled_only(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


class Observed(Adapter):
    """Passes every call to `inner` and records what happened."""

    def __init__(self, inner: Adapter) -> None:
        self.inner = inner
        self.turns: list[TurnRecord] = []
        self.left: list[RoomLeft] = []
        self.started: list[AgentInfo] = []
        self._changed = trio.Event()

    # -- the adapter's calls, passed through ----------------------------------

    async def on_started(self, agent: AgentInfo) -> None:
        self.started.append(agent)
        await self.inner.on_started(agent)

    async def on_turn(self, turn: Turn) -> None:
        record = TurnRecord(turn.message.id, turn.message.content, turn, time.perf_counter())
        self.turns.append(record)
        record.turn = watched = watched_turn(turn, record.watch, self._notify)
        self._notify()
        try:
            await self.inner.on_turn(watched)
        except BaseException as exc:
            if cancelled_only(exc):  # a cancel, maybe through the adapter's nurseries
                self._end(record, "cancelled")
            else:
                self._end(record, "raised", f"{type(exc).__name__}: {exc}")
            raise
        self._end(record, "returned")

    async def on_room_left(self, room_id: str) -> None:
        self.left.append(RoomLeft(room_id, time.perf_counter()))  # when it was called
        self._notify()
        await self.inner.on_room_left(room_id)

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return self.inner.lifespan()

    # -- observation ----------------------------------------------------------

    def of(self, message_id: str) -> list[TurnRecord]:
        """Every turn run for `message_id`, in order (a replay enters it again)."""
        return [record for record in self.turns if record.message_id == message_id]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, re-checked after each recorded change;
        the caller sets the deadline."""
        while not predicate():
            await self._changed.wait()

    def _end(self, record: TurnRecord, ending: Ending, error: str | None = None) -> None:
        record.ended = time.perf_counter()
        record.ending = ending
        record.error = error
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()
