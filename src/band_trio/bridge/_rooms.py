"""The rooms of one bridged identity: one task per room, in a nursery this host owns.

The runtime's link keeps this set in step with the platform (`LinkedRooms`):
the room list read page by page at each connect, `room_added` and
`room_removed` pushes, refused joins. Leaving a room cancels its task, which
cancels the forward in flight there and drops its queue. A `room_removed`
itself is forwarded after the room has gone, as tracked work of this nursery.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Iterable, Mapping

import trio

from ._envelope import Envelope
from ._room import ForwardRoom
from ._shared import Shared

__all__ = ["ForwardRooms"]

log = logging.getLogger("band_trio.bridge.rooms")


class ForwardRooms:
    """Every room one identity is in, each a task of this host's nursery."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._rooms: dict[str, ForwardRoom] = {}
        self.current: Mapping[str, ForwardRoom] = types.MappingProxyType(self._rooms)
        self._scopes: dict[ForwardRoom, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    # -- synchronous: the link -------------------------------------------------

    def get(self, room_id: str) -> ForwardRoom | None:
        return self._rooms.get(room_id)

    def add(self, room_id: str) -> ForwardRoom | None:
        if room_id in self._rooms or self._nursery is None:
            return None
        room = self._rooms[room_id] = ForwardRoom(room_id, self._shared)
        scope = self._scopes[room] = trio.CancelScope()
        self._nursery.start_soon(self._host, room, scope, name=f"bridge room {room_id}")
        self._shared.changes.notify()
        return room

    def remove(self, room_id: str, why: str) -> None:
        room = self._rooms.pop(room_id, None)
        if room is None:
            return
        log.info("left room %s: %s", room_id, why)
        self._scopes[room].cancel(reason=why)
        self._shared.changes.notify()

    def reconcile(self, wanted: Iterable[str]) -> None:
        wanted = list(wanted)
        for gone in set(self._rooms) - set(wanted):
            self.remove(gone, "no longer in the room list")
        for room_id in wanted:
            self.add(room_id)

    def depart(self, envelope: Envelope) -> None:
        """Forward the event of a room already left (`room_removed`, `room_deleted`)."""
        if self._nursery is not None:
            room = ForwardRoom(envelope.room_id or "", self._shared)
            room.offer(envelope)
            scope = self._scopes[room] = trio.CancelScope()
            self._nursery.start_soon(self._host, room, scope, True, name="bridge departure")

    # -- observation -----------------------------------------------------------

    @property
    def idle(self) -> bool:
        return all(room.idle for room in self._scopes)

    @property
    def in_flight(self) -> int:
        return sum(1 for room in self._scopes if room.running is not None)

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._shared.changes.wait()

    # -- the host's task -------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    async def _host(self, room: ForwardRoom, scope: trio.CancelScope, once: bool = False) -> None:
        try:
            with scope:
                await room.run(until_empty=once)
        finally:
            if self._rooms.get(room.id) is room:
                del self._rooms[room.id]
            del self._scopes[room]
            self._shared.changes.notify()
