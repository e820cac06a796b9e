"""The rooms of one bridged identity: the runtime's rooms host, running `ForwardRoom`s.

The runtime's link keeps this set in step with the platform (`LinkedRooms`):
the room list read page by page at each connect, `room_added` and
`room_removed` pushes, refused joins. The host is the runtime's own
(`RoomHost`): leaving a room, the shutdown after its grace and the hard stop
each record the abort on the forward in flight before they cancel it, so a
target's remote start is bounded whoever cancels. A `room_removed` itself is
forwarded after the room has gone, as a room task of its own (`depart`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..runtime._parts import Journal, RoomHost
from ._envelope import Envelope
from ._room import ForwardRoom
from ._shared import Shared

__all__ = ["ForwardRooms"]


class ForwardRooms(RoomHost[ForwardRoom]):
    """Every room one identity is in, each a task of the host's nursery."""

    def __init__(self, shared: Shared, journal: Journal) -> None:
        super().__init__(
            lambda room_id: ForwardRoom(room_id, shared),
            policy=shared.policy,
            changes=shared.changes,
            journal=journal,
            cutoff=shared.cutoff,
            shutdown_grace=shared.bridge_policy.shutdown_grace,
            what="bridge room",
            unit="forward",
        )
        self._shared = shared

    def depart(self, envelope: Envelope) -> None:
        """Forward the event of a room already left (`room_removed`, `room_deleted`)."""
        room = ForwardRoom(envelope.room_id or "", self._shared, once=True)
        room.offer(envelope)
        self.adopt(room, "bridge departure")

    # -- observation -----------------------------------------------------------

    @property
    def idle(self) -> bool:
        return all(room.idle for room in self.hosted)

    @property
    def in_flight(self) -> int:
        return sum(1 for room in self.hosted if room.running is not None)

    async def until(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._shared.changes.wait()
