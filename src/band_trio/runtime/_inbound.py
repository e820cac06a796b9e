"""Turning a pushed or fetched wire message (or a room event) into a room's unit of work."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Protocol

from ..contract import Message
from ..wire import ChatMessage, MessageCreated

if TYPE_CHECKING:
    from ._room import Room

__all__ = ["MESSAGE", "Inbound", "Submitted", "event_unit", "inbound"]


class Submitted(Protocol):
    """A unit a room's owner hands the room (`Room.submit`): it runs in the room's
    order, in the room's task, and says itself what it does, through the room's
    `run_turn` and `settle_pending`; it returns whether its message moved on."""

    @property
    def message(self) -> Message: ...

    async def run(self, room: Room) -> bool: ...


MESSAGE = "message_created"
"""The event of a message: the only unit that is claimed and marked."""


class Inbound:
    """A message on its way into a room, with the facts the room needs to skip it; or,
    in a room whose rules pass events (a bridged identity's), a room or participant
    event (`event` names it, `message` is a stand-in)."""

    __slots__ = (
        "event", "failed_attempts", "message", "processed", "replayed", "submitted", "wire",
    )  # fmt: skip

    def __init__(
        self,
        message: Message,
        processed: bool,
        failed_attempts: int = 0,
        *,
        wire: object = None,
        event: str = MESSAGE,
        submitted: Submitted | None = None,
        replayed: bool = False,
    ) -> None:
        self.message = message
        self.replayed = replayed
        """The platform shows it `processing` for this agent: an earlier attempt of ours
        did not settle it (a run that died, a stop) and this is its replay."""
        self.submitted = submitted
        """A unit its room's owner submitted (`Room.submit`): it runs itself, in order."""
        self.wire = wire
        """The payload as the platform sent it (what a bridge forwards on)."""
        self.event = event
        self.processed = processed
        """The platform already shows it `processed` for this agent."""
        self.failed_attempts = failed_attempts
        """The attempts the platform counts for it, when it shows it `failed` for this
        agent (0 otherwise): a claim would open one more (docs/reference/runtime.md,
        "The attempt budget is the platform's")."""


def inbound(room_id: str, agent_id: str, wire: MessageCreated | ChatMessage) -> Inbound:
    metadata = wire.metadata
    mentions: tuple[str, ...] = ()
    processed = False
    replayed = False
    failed_attempts = 0
    if metadata is not None:
        if metadata.mentions:
            mentions = tuple(m.id for m in metadata.mentions)
        if metadata.delivery_status:
            mine = metadata.delivery_status.get(agent_id)
            if isinstance(mine, dict):
                processed = mine.get("status") == "processed"
                replayed = mine.get("status") == "processing"
                if mine.get("status") == "failed":
                    failed_attempts = _attempts(mine)
    message = Message(
        id=wire.id,
        room_id=room_id,
        content=wire.content,
        sender_id=wire.sender_id,
        sender_type=wire.sender_type,
        sender_name=wire.sender_name,
        message_type=wire.message_type,
        mentions=mentions,
        inserted_at=wire.inserted_at,
    )
    return Inbound(message, processed, failed_attempts, wire=wire, replayed=replayed)


def event_unit(room_id: str, event: str, payload: object) -> Inbound:
    """A room or participant event as a unit of a room's queue: a stand-in message
    naming the event (a room and an id are what the remote-stop bookkeeping and
    `run_command` need), never claimed, marked, or kept in the ledger."""
    message = Message(
        id=f"{event}:{uuid.uuid4().hex[:12]}",
        room_id=room_id,
        content="",
        sender_id="",
        sender_type="System",
        message_type=event,
    )
    return Inbound(message, False, wire=payload, event=event)


def _attempts(delivery: dict[str, object]) -> int:
    """How many attempts a delivery status counts: its `attempts` list, else its
    `current_attempt`, else one (a `failed` delivery had at least one)."""
    attempts = delivery.get("attempts")
    if isinstance(attempts, list) and attempts:
        return len(attempts)
    current = delivery.get("current_attempt")
    if isinstance(current, int) and not isinstance(current, bool) and current > 0:
        return current
    return 1
