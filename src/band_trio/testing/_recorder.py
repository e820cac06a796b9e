"""An adapter that records what happened to each turn, with a change signal to wait on."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import trio

from ..contract import Adapter, Turn

__all__ = ["Behaviour", "RecordingAdapter"]

Behaviour = Callable[[Turn], Awaitable[None]]


async def _echo(turn: Turn) -> None:
    await turn.reply(f"echo: {turn.message.content}")


class RecordingAdapter(Adapter):
    """Runs `behaviour` for each turn and records it.

    `calls`, `cancelled` and `finished` list message contents in order;
    `entered` and `cancelled_at` hold `time.perf_counter()` stamps by message
    id (a replayed message enters more than once). `wait_for(predicate)`
    re-checks after every recorded change; the caller sets the deadline.
    """

    def __init__(self, behaviour: Behaviour = _echo) -> None:
        self.behaviour = behaviour
        self.calls: list[str] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self.left: list[str] = []
        self.entered: dict[str, list[float]] = {}
        self.cancelled_at: dict[str, float] = {}
        self._changed = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        message = turn.message
        self.entered.setdefault(message.id, []).append(time.perf_counter())
        self.calls.append(message.content)
        self._notify()
        try:
            await self.behaviour(turn)
        except trio.Cancelled:
            self.cancelled_at[message.id] = time.perf_counter()
            self.cancelled.append(message.content)
            self._notify()
            raise
        self.finished.append(message.content)
        self._notify()

    async def on_room_left(self, room_id: str) -> None:
        self.left.append(room_id)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()
