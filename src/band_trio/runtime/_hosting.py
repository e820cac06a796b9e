"""What the link supervisor and the rooms host need of the rooms they drive.

The link (`_link_supervisor`, `_connection`) and the control lane (`_control`) drive
rooms only through `LinkedRooms`/`LinkedRoom`, and the rooms host (`_rooms`)
runs any `HostedRoom`, so the same link — key check, connections, joins,
reconnects, terminal disconnects, signal dedup — and the same host — one task
per room, the leave, the shutdown, the hard stop — serve the agent's own rooms
(`_room.Room`) and the bridge's forwarding rooms alike. All are satisfied
structurally; nothing subclasses them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import trio

from ..contract import TurnControl
from ..link import Socket
from ._inbound import Inbound
from ._turn_state import AbortKind

__all__ = ["HostedRoom", "InFlight", "LinkedRoom", "LinkedRooms"]


class LinkedRoom(Protocol):
    """One room as the link sees it. Every method is synchronous: the socket's reader
    calls them, and must never block."""

    @property
    def id(self) -> str: ...

    def joined(self, socket: Socket) -> None:
        """The room's topics were joined on `socket`."""

    def push(self, item: Inbound) -> None:
        """A `message_created` pushed on the room's topic."""

    def interrupt(self, reason: str | None) -> bool:
        """An `interrupt` signal for this room."""
        ...

    def stop(self, reason: str | None) -> None:
        """A `stop` signal for this room."""

    def play(self) -> None:
        """A `play` signal for this room."""


class LinkedRooms(Protocol):
    """The set of rooms the link keeps in step with the platform's room list."""

    @property
    def current(self) -> Mapping[str, LinkedRoom]: ...

    def get(self, room_id: str) -> LinkedRoom | None: ...

    def add(self, room_id: str) -> LinkedRoom | None:
        """Start serving `room_id`; None if served already (or closing)."""

    def remove(self, room_id: str, why: str) -> None: ...

    def reconcile(self, wanted: Iterable[str]) -> None:
        """Match the room list: leave the rooms not in `wanted`, add the new ones."""


class InFlight(Protocol):
    """The unit of work a hosted room is doing now: a turn, or a forward."""

    @property
    def control(self) -> TurnControl:
        """Its remote-work bookkeeping: `control.message_id` names the unit."""
        ...

    @property
    def finished(self) -> bool:
        """The adapter (or target) returned or raised: an abort now aborts nothing."""
        ...

    @property
    def done(self) -> trio.Event:
        """Set once its scope has exited."""
        ...

    async def wait_settled(self, grace: float) -> bool:
        """Wait (`grace`, plus any remote start or stop in progress) for `done`."""
        ...


class HostedRoom(LinkedRoom, Protocol):
    """A room as the rooms host (`_rooms.RoomHost`) runs it: one task, cancelled to leave.

    The host calls `ending` before every cancel it makes — a leave, the shutdown after
    its grace, a hard stop — so the unit in flight has its abort recorded first: its
    remote starts are then bounded by the stop grace, and its message is left, never
    taken for a success or a failure."""

    async def run(self) -> None:
        """The room's loop; returns once drained (`drain`)."""

    def drain(self) -> None:
        """Finish the work in hand (mark included), then return from `run`."""

    def ending(self, kind: AbortKind, reason: str) -> None:
        """The host is about to cancel the room: record why on the unit in flight."""

    def request_resync(self) -> None:
        """Catch up through `/next` (the host restarted a crashed loop)."""

    @property
    def in_flight(self) -> InFlight | None:
        """The unit of work running now, if any."""
        ...

    def close_needed(self, *, leave: bool) -> bool:
        """Whether `close(leave=leave)` would do anything; if not, the host skips it
        (and the shielded scope around it)."""
        ...

    async def close(self, *, leave: bool) -> None:
        """After the room's task ended: leave its topics (unless `leave` is False: the
        host is shutting down, and the socket's close leaves them all), tell the
        adapter (or target) that the room is gone. Each part is bounded; the host
        shields the whole."""
