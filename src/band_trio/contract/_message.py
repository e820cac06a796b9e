"""What an adapter is told about: the message, the room's people, the agent, the last abort."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_ANSWER_CHARS", "AgentInfo", "LastAbort", "Message", "Participant"]

MAX_ANSWER_CHARS = 1_000_000
"""The most text an adapter gathers from its peer for one answer: a peer that streams
on without end fails the turn (`PeerProtocolError`) instead of growing the agent's
memory (the platform takes at most 8 MiB in one post anyway)."""


@dataclass(frozen=True, slots=True)
class Message:
    """A message of a room: the one a turn answers, or one of the room's history."""

    id: str
    room_id: str
    content: str
    sender_id: str
    sender_type: str
    sender_name: str | None = None
    message_type: str = "text"
    mentions: tuple[str, ...] = ()
    """Ids of the participants the message mentions."""
    inserted_at: str | None = None


@dataclass(frozen=True, slots=True)
class Participant:
    """A member of a room, as the platform lists it (`GET .../participants`)."""

    id: str
    type: str
    """`"User"`, `"Agent"`, or another kind the platform knows."""
    role: str
    name: str | None = None
    handle: str | None = None


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """Who the agent is, from the platform (`GET /me`), for `Adapter.on_started`."""

    id: str
    name: str
    handle: str
    description: str | None = None


@dataclass(frozen=True, slots=True)
class LastAbort:
    """The last interrupt or stop that aborted a turn in a room.

    The next turn in that room sees it as `Turn.last_abort`, so it can tell the
    model why its previous answer was cut off."""

    kind: Literal["interrupt", "stop"]
    reason: str | None
    """The reason the signal carried (None if it carried none)."""
    message_id: str
    """The message whose turn was aborted."""
