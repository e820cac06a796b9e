"""The adapter contract: what an adapter implements, and the `Turn` it is handed.

An adapter is driven one reasoning cycle (a *turn*) at a time per room. The
runtime runs `Adapter.on_turn` inside the turn's cancel scope: an interrupt or
stop from the room's users cancels it, so an adapter needs no flags of its own
to stop — it just has to let `trio.Cancelled` through (cleanup in `finally` is
fine; swallowing it does not make the turn a success).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Adapter", "Message", "Turn", "TurnPort"]


@dataclass(frozen=True, slots=True)
class Message:
    """The message a turn answers."""

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


class TurnPort(Protocol):
    """How a `Turn` reaches the platform; implemented by the runtime."""

    async def post_message(self, content: str, mentions: Sequence[str]) -> str: ...

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str: ...


class Turn:
    """One reasoning cycle for one message, as the adapter sees it."""

    __slots__ = ("_port", "message")

    def __init__(self, message: Message, port: TurnPort) -> None:
        self.message = message
        self._port = port

    @property
    def room_id(self) -> str:
        return self.message.room_id

    async def reply(self, content: str, *, mentions: Sequence[str] | None = None) -> str:
        """Post `content` to the room; returns the new message's id.

        Mentions are participant ids; by default the sender of the message is
        mentioned, so the reply reaches them. If the room was stopped on the
        platform meanwhile, the turn is aborted (this call raises `Cancelled`).
        """
        if not content.strip():
            raise ValueError("a reply needs non-blank content")
        targets = list(mentions) if mentions is not None else [self.message.sender_id]
        if not targets:
            raise ValueError("a reply needs at least one mention")
        return await self._port.post_message(content, targets)

    async def send_event(
        self,
        content: str,
        *,
        message_type: str = "thought",
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Post a non-message event (`thought`, `tool_call`, `tool_result`, ...)."""
        return await self._port.post_event(content, message_type, metadata)


class Adapter(abc.ABC):
    """Subclass this and implement `on_turn`."""

    @abc.abstractmethod
    async def on_turn(self, turn: Turn) -> None:
        """Run one reasoning cycle. Raising marks the message `failed`."""

    async def on_room_left(self, room_id: str) -> None:  # noqa: B027 - optional hook
        """Called (with a short deadline) after the agent left a room."""
