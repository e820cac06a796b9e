"""Server-pushed event payloads, as strict as band-sdk 6.0.1's validator.

Field rules, as band-sdk 6.0.1 checks them: a plain type is required and non-null;
`X | None = None` may be null or absent; `X | UnsetType = UNSET` ("no null")
may be absent but not null. Unknown extra keys are accepted. A payload that
fails raises `PayloadError` naming its event, so the caller can log and count
it and keep the connection.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "EVENT_TYPES",
    "AgentControl",
    "Mention",
    "MessageCreated",
    "MessageMetadata",
    "ParticipantAdded",
    "ParticipantRemoved",
    "PayloadError",
    "Reply",
    "RoomAdded",
    "RoomDeleted",
    "RoomRemoved",
    "Supersede",
    "decode_payload",
]


class PayloadError(ValueError):
    """A payload that does not match its event's schema."""

    def __init__(self, event: str, detail: str) -> None:
        super().__init__(f"invalid {event} payload: {detail}")
        self.event = event
        self.detail = detail


class _Payload(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    pass


class Mention(_Payload):
    id: str
    username: str | None = None
    handle: str | None = None
    name: str | None = None


class MessageMetadata(_Payload):
    mentions: list[Mention] | None = None
    status: str | UnsetType = UNSET
    delivery_status: dict[str, dict[str, Any]] | None = None


class MessageCreated(_Payload):
    """`message_created` on `chat_room:{id}` (also the shape of `message_updated`)."""

    id: str
    content: str
    message_type: str
    sender_type: str
    sender_id: str
    inserted_at: str
    updated_at: str
    metadata: MessageMetadata | None = None
    sender_name: str | None = None
    chat_room_id: str | None = None
    thread_id: str | None = None
    attachments: list[Any] | None = None


class RoomAdded(_Payload):
    """`room_added` on `agent_rooms:{agent_id}`."""

    id: str
    inserted_at: str
    updated_at: str
    title: str | None = None
    task_id: str | None = None


class RoomRemoved(RoomAdded):
    """`room_removed` on `agent_rooms:{agent_id}`."""


class RoomDeleted(_Payload):
    """`room_deleted` on `room_participants:{room_id}`."""

    id: str


class ParticipantAdded(_Payload):
    """`participant_added` on `room_participants:{room_id}`."""

    id: str
    type: str
    name: str
    handle: str | UnsetType = UNSET
    description: str | None = None
    is_remote: bool | None = None
    is_external: bool | None = None


class ParticipantRemoved(_Payload):
    """`participant_removed` on `room_participants:{room_id}`."""

    id: str
    type: str
    name: str
    handle: str | UnsetType = UNSET


class AgentControl(_Payload):
    """`agent.control` on `agent_control:{agent_id}`: interrupt, stop or play."""

    mode: Literal["interrupt", "stop", "play"]
    scope: Literal["agent", "room"]
    agent_id: str
    correlation_id: str
    execution_id: str | None
    room_id: str | None
    reason: str | UnsetType = UNSET
    type: str | UnsetType = UNSET


class Supersede(_Payload):
    """`supersede` on `agent_control:{agent_id}`: this socket is replaced."""

    reason: str
    message: str
    correlation_id: str | None = None
    retryable: bool | None = None
    retry_after: int | None = None
    target_socket_id: str | None = None


class Reply(_Payload):
    """`phx_reply` to a join, leave or heartbeat."""

    status: str
    response: dict[str, Any] = msgspec.field(default_factory=dict)


EVENT_TYPES: dict[str, type[_Payload]] = {
    "message_created": MessageCreated,
    "message_updated": MessageCreated,
    "room_added": RoomAdded,
    "room_removed": RoomRemoved,
    "room_deleted": RoomDeleted,
    "participant_added": ParticipantAdded,
    "participant_removed": ParticipantRemoved,
    "agent.control": AgentControl,
    "supersede": Supersede,
    "phx_reply": Reply,
}

_decoders = {event: msgspec.json.Decoder(kind) for event, kind in EVENT_TYPES.items()}


def decode_payload(event: str, payload: bytes | msgspec.Raw) -> Any:
    """Decode a payload of a known event, or raise `PayloadError`.

    Unknown events raise `KeyError`: the caller decides whether to ignore them.
    """
    decoder = _decoders[event]
    try:
        return decoder.decode(payload)
    except msgspec.DecodeError as exc:  # ValidationError is a DecodeError
        raise PayloadError(event, str(exc)) from None
    except RecursionError:
        raise PayloadError(event, "JSON nested too deeply") from None
