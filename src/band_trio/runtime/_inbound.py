"""Turning a pushed or fetched wire message into the adapter's `Message`."""

from __future__ import annotations

from ..contract import Message
from ..wire import ChatMessage, MessageCreated

__all__ = ["Inbound", "inbound"]


class Inbound:
    """A message on its way into a room, with the facts the room needs to skip it."""

    __slots__ = ("message", "processed")

    def __init__(self, message: Message, processed: bool) -> None:
        self.message = message
        self.processed = processed
        """The platform already shows it `processed` for this agent."""


def inbound(room_id: str, agent_id: str, wire: MessageCreated | ChatMessage) -> Inbound:
    metadata = wire.metadata
    mentions: tuple[str, ...] = ()
    processed = False
    if metadata is not None:
        if metadata.mentions:
            mentions = tuple(m.id for m in metadata.mentions)
        if metadata.delivery_status:
            mine = metadata.delivery_status.get(agent_id)
            processed = isinstance(mine, dict) and mine.get("status") == "processed"
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
    return Inbound(message, processed)
