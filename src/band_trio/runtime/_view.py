"""`RoomView`: what a user of `Agent.rooms` may look at, and nothing to pull on."""

from __future__ import annotations

from typing import Literal

from ..contract import LastAbort
from ._room import Room

__all__ = ["RoomView"]

Standing = Literal["runnable", "ack_pending", "completed", "exhausted"]


class RoomView:
    """A live, read-only view of one room of a running agent."""

    __slots__ = ("_room",)

    def __init__(self, room: Room) -> None:
        self._room = room

    def __repr__(self) -> str:
        return f"<RoomView {self.id} joined={self.joined} stopped={self.stopped}>"

    @property
    def id(self) -> str:
        return self._room.id

    @property
    def joined(self) -> bool:
        """Whether the room's topics are joined on the connection that is open now."""
        return self._room.joined_now

    @property
    def stopped(self) -> bool:
        """Whether a `stop` holds the room (until `play`)."""
        return self._room.stopped

    @property
    def running(self) -> str | None:
        """The id of the message whose turn is running (until it has settled)."""
        turn = self._room.turn
        return None if turn is None else turn.message.id

    @property
    def queued(self) -> int:
        """Pushed messages waiting for their turn (at most `Policy.room_inbox`)."""
        return self._room.queued

    @property
    def overflowed(self) -> int:
        """How often the queue was full: it was dropped for a `/next` catch-up, which
        finds the same messages in order."""
        return self._room.overflowed

    @property
    def last_abort(self) -> LastAbort | None:
        """The last interrupt or stop that aborted a turn here (the next turn is told)."""
        return self._room.last_abort

    def attempts(self, message_id: str) -> int:
        """Adapter runs charged to `message_id` in this process (our own aborts give
        theirs back)."""
        return self._room.ledger.attempts(message_id)

    def standing(self, message_id: str) -> Standing:
        """What the room may still do with `message_id`: run it, retry only its final
        mark (`ack_pending`), or nothing (`completed`, `exhausted`)."""
        value: Standing = self._room.ledger.standing(message_id).value
        return value
