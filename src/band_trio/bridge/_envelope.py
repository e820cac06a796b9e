"""The JSON envelope a forward carries: what happened, to which identity, in which room.

    {"event_type": "message_created", "agent_id": "A", "room_id": "R",
     "payload": {...the push as the platform sent it...},
     "forwarded_at": "2026-12-01T14:30:00.123456Z"}

`payload` is the decoded push re-encoded (unknown keys the platform sent are
kept). A target tells events apart by `event_type` and needs nothing else.
"""

from __future__ import annotations

import datetime
from typing import Any

import msgspec

__all__ = ["FORWARDED_EVENTS", "INTERRUPTED", "Envelope", "decode_envelope", "envelope_for"]

FORWARDED_EVENTS = frozenset(
    {
        "message_created",
        "room_added",
        "room_removed",
        "room_deleted",
        "participant_added",
        "participant_removed",
    }
)
"""The pushes a bridge forwards: message, room and participant events. Control
signals and `supersede` are acted on by the bridge itself, never forwarded."""

INTERRUPTED = "message_interrupted"
"""The bridge's own envelope to a target that settles what it runs (`band-trio host`):
the forward of the message `payload["id"]` was cut off by an interrupt, consume it.
Only the claimer can consume without racing its own claim (docs/how-to/bridge.md)."""


class Envelope(msgspec.Struct, frozen=True, kw_only=True):
    event_type: str
    agent_id: str
    room_id: str | None
    payload: dict[str, Any]
    forwarded_at: str

    @property
    def message_id(self) -> str | None:
        """The id of a forwarded message (the dedup key); None for other events."""
        if self.event_type != "message_created":
            return None
        value = self.payload.get("id")
        return value if isinstance(value, str) else None

    def encode(self) -> bytes:
        return msgspec.json.encode(self)


def envelope_for(event_type: str, agent_id: str, room_id: str | None, payload: Any) -> Envelope:
    """An envelope for one push (`payload`: a wire struct or a plain dict)."""
    body = msgspec.to_builtins(payload)
    if not isinstance(body, dict):
        body = {"value": body}
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")
    return Envelope(
        event_type=event_type,
        agent_id=agent_id,
        room_id=room_id,
        payload=body,
        forwarded_at=stamp.replace("+00:00", "Z"),
    )


def decode_envelope(body: bytes) -> Envelope:
    """Parse an envelope (`msgspec.ValidationError` / `DecodeError` if it is not one)."""
    return msgspec.json.decode(body, type=Envelope)
