"""What the link supervisor needs of the rooms it hands connections to.

The link (`_link`, `_connection`) and the control lane (`_control`) drive
rooms only through these two protocols, so the same link — key check,
connections, joins, reconnects, terminal disconnects, signal dedup — serves
the agent's own rooms (`_rooms.Rooms`, `_room.Room`) and the bridge's
forwarding rooms alike. Both are satisfied structurally; nothing subclasses them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from ..link import Socket
from ._inbound import Inbound

__all__ = ["LinkedRoom", "LinkedRooms"]


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
