"""The control lane: interrupt, stop and play, applied one at a time in arrival order.

Applying a signal is synchronous — it cancels a turn's scope or flips a room's
suppression and wakes its loop — so the lane needs no task and no queue: the
websocket reader applies each signal the moment it decodes it. Nothing can
queue a signal behind room work, and the reader never blocks on it. The
follow-up work (the `processed` mark of an interrupted message, the `/next`
catch-up after play) runs in the room's own task.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from ..observe import hooks as observe
from ..wire import AgentControl
from ._context import Changes
from ._hosting import LinkedRoom

__all__ = ["ControlLane", "SignalCounts"]

log = logging.getLogger("band_trio.runtime.control")


@dataclass(frozen=True, slots=True)
class SignalCounts:
    """How many control signals the agent applied, and how many it ignored as copies."""

    applied: int
    duplicates: int


class ControlLane:
    """Routes `agent.control` signals to rooms, de-duplicated by correlation id.

    One lane per agent, so its memory of correlation ids outlives reconnects and
    runs; the link hands it the rooms with each signal.
    """

    def __init__(self, *, memory: int, changes: Changes) -> None:
        self._memory = memory
        self._changes = changes
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.applied = 0
        self.duplicates = 0

    @property
    def counts(self) -> SignalCounts:
        return SignalCounts(applied=self.applied, duplicates=self.duplicates)

    def apply(self, signal: AgentControl, rooms: Mapping[str, LinkedRoom]) -> None:
        """Route and apply one signal to `rooms`, now. Its correlation id is bound while
        it is applied: the turns it aborts and the lines it logs carry it."""
        try:
            with observe.bound(correlation=signal.correlation_id or None):
                observe.signal_counted(signal.mode, self._apply(signal, rooms))
        finally:
            self._changes.notify()

    def _apply(self, signal: AgentControl, rooms: Mapping[str, LinkedRoom]) -> str:
        """Apply the signal; what became of it (`applied`, `duplicate`, `no_room`)."""
        # A play is never a duplicate of a stop: the key includes the mode.
        key = (signal.correlation_id, signal.mode)
        if key in self._seen:
            self.duplicates += 1
            log.info("ignored duplicate %s (%s)", signal.mode, signal.correlation_id)
            return "duplicate"
        if signal.room_id is not None:
            targets = [rooms[signal.room_id]] if signal.room_id in rooms else []
            if not targets:
                log.info("%s for unknown room %s: no-op", signal.mode, signal.room_id)
        elif signal.scope == "agent":
            targets = list(rooms.values())
        else:
            log.warning("%s with no room and scope=%s: ignored", signal.mode, signal.scope)
            targets = []
        if not targets:
            return "no_room"  # a signal that reached no room is not remembered
        if signal.correlation_id:  # an empty id can't be told apart: never remembered
            self._remember(key)
        self.applied += 1
        reason = signal.reason if isinstance(signal.reason, str) else None
        for room in targets:
            if signal.mode == "interrupt":
                room.interrupt(reason)
            elif signal.mode == "stop":
                room.stop(reason)
            else:
                room.play()
        if log.isEnabledFor(logging.INFO):  # its words are built only for a line written
            room_id = signal.room_id
            log.info(
                "%s applied to %s%s (%s)",
                signal.mode,
                f"room {room_id}" if room_id is not None else f"{len(targets)} room(s)",
                f": {reason}" if reason else "",
                signal.correlation_id or "no correlation id",
            )
        return "applied"

    def _remember(self, key: tuple[str, str]) -> None:
        self._seen[key] = None
        while len(self._seen) > self._memory:
            self._seen.popitem(last=False)
