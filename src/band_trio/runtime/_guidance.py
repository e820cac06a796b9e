"""Guidance: the room's messages offered to its running turn (`WhileBusy.STEER`).

| a message arriving while a turn runs | platform              | then                           |
|--------------------------------------|-----------------------|--------------------------------|
| offered, not taken                   | untouched             | its own turn after, in order   |
| taken (`Turn.take_guidance`)         | claimed at once       | shares the turn's fate:        |
|   the turn succeeds                  | `processed` with it   | never answered on its own      |
|   the turn fails                     | `failed`, same label  | never run again                |
|   an interrupt                       | `processed`, consumed | gone with the turn             |
|   a stop, a leave, the shutdown      | left `processing`     | replayed after the turn's one  |

An offered message stays in the room's queue until it is taken, so a turn that
never takes guidance is exactly `ENQUEUE`, and a queue drop (a reconnect, an
overflow) drops an untaken offer with it: `/next` brings it back in order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from .. import errors
from ..contract import Message
from ._inbound import Inbound
from ._queue import RoomQueue

__all__ = ["Guidance", "Taken"]

log = logging.getLogger("band_trio.runtime.guidance")

Claim = Callable[[Message], Awaitable[bool | None]]
"""Claims a message (True: an attempt opened; False: answered stopped; None: failed)."""


class Taken:
    """A message a turn took, and its claim."""

    __slots__ = ("claimed", "message", "settled")

    def __init__(self, message: Message) -> None:
        self.message = message
        self.claimed: bool | None = None
        self.settled = trio.Event()
        """Set once the claim has its answer (or failed)."""


class Guidance:
    """What is offered to one turn, and what it took."""

    __slots__ = ("_changed", "_claim", "_nursery", "_offered", "_queue", "taken")

    def __init__(self, queue: RoomQueue) -> None:
        self._queue = queue
        self._offered: list[Inbound] = []
        self._changed = trio.Event()
        self.taken: list[Taken] = []
        self._nursery: trio.Nursery | None = None
        self._claim: Claim | None = None

    def start(self, nursery: trio.Nursery, claim: Claim) -> None:
        """Claims run in `nursery` (the turn's own, which outlives its scope)."""
        self._nursery = nursery
        self._claim = claim

    def offer(self, item: Inbound) -> None:
        if len(self._offered) >= len(self._queue):  # a queue drop left stale offers
            self._offered = [offered for offered in self._offered if self._queue.holds(offered)]
        self._offered.append(item)
        self._changed.set()

    @property
    def waiting(self) -> bool:
        return any(self._queue.holds(item) for item in self._offered)

    def take(self) -> tuple[Message, ...]:
        """The offered messages still queued, oldest first; they leave the queue."""
        if not self._offered:
            return ()
        items = [item for item in self._offered if self._queue.remove(item)]
        self._offered.clear()
        self._changed = trio.Event()
        for item in items:
            taken = Taken(item.message)
            self.taken.append(taken)
            if self._nursery is not None and self._claim is not None:
                self._nursery.start_soon(self._claim_one, self._claim, taken)
            else:  # a unit the runtime does not claim for: nothing to wait for
                taken.settled.set()
        return tuple(item.message for item in items)

    async def wait(self) -> None:
        while not self.waiting:
            await self._changed.wait()
            if not self.waiting:
                self._changed = trio.Event()

    @staticmethod
    async def _claim_one(claim: Claim, taken: Taken) -> None:
        try:
            taken.claimed = await claim(taken.message)
        except errors.PlatformError as exc:
            log.info("room %s: claim of guidance %s failed: %s", taken.message.room_id,
                     taken.message.id, exc)  # fmt: skip
        finally:
            taken.settled.set()
