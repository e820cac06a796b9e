"""Push payloads and REST message bodies built from stored records.

band-sdk 6.0.1's validator is strict in uneven ways (the field rules are in
`band_trio.wire._events`): a "no null" field must be omitted, never sent as
null. The wire Structs omit defaults, so a field left unset here is simply
absent on the wire.
"""

from __future__ import annotations

from typing import Any

from ..wire import ChatMessage, Mention, MessageCreated, MessageMetadata, RoomAdded
from ._store import Agent, Delivery, Message, Room, User

__all__ = [
    "chat_message",
    "mention_of",
    "message_created",
    "participants_topic",
    "room_payload",
    "room_topic",
]


def room_topic(room_id: str) -> str:
    return f"chat_room:{room_id}"


def participants_topic(room_id: str) -> str:
    return f"room_participants:{room_id}"


def mention_of(profile: Agent | User) -> dict[str, Any]:
    return {"id": profile.id, "handle": profile.handle, "name": profile.name}


def _metadata(message: Message) -> MessageMetadata:
    mentions = [
        Mention(id=m["id"], username=m.get("handle"), handle=m.get("handle"), name=m.get("name"))
        for m in message.mentions
    ]
    return MessageMetadata(mentions=mentions, status="sent")


def message_created(message: Message) -> MessageCreated:
    """The `message_created` payload: "no null" fields are omitted, never null."""
    return MessageCreated(
        id=message.id,
        content=message.content,
        message_type=message.message_type,
        sender_type=message.sender_type,
        sender_id=message.sender_id,
        inserted_at=message.inserted_at,
        updated_at=message.inserted_at,
        metadata=_metadata(message),
        sender_name=message.sender_name,
        chat_room_id=message.room_id,
    )


def chat_message(message: Message, agent_id: str, delivery: Delivery | None) -> ChatMessage:
    """A message as REST shows it to `agent_id`, with that agent's delivery status."""
    metadata = _metadata(message)
    if delivery is not None:
        attempts = [{"attempt_number": n} for n in range(1, delivery.attempts + 1)]
        metadata.delivery_status = {
            agent_id: {
                "status": delivery.status,
                "current_attempt": delivery.current_attempt,
                "attempts": attempts,
            }
        }
    return ChatMessage(
        id=message.id,
        content=message.content,
        message_type=message.message_type,
        sender_id=message.sender_id,
        sender_type=message.sender_type,
        chat_room_id=message.room_id,
        sender_name=message.sender_name,
        inserted_at=message.inserted_at,
        updated_at=message.inserted_at,
        attachments=[],
        metadata=metadata,
    )


def room_payload(room: Room, kind: type[RoomAdded]) -> RoomAdded:
    return kind(
        id=room.id, inserted_at=room.inserted_at, updated_at=room.inserted_at, title=room.title
    )
