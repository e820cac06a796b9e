"""The `contract.TurnPort` of one forward: what a target that speaks in the room
(the A2A target posting its agent's answer) posts through, as the identity."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import trio

from .. import errors
from ..contract import Message, Participant, Turn
from ..link import RestClient
from ..runtime._parts import inbound
from ..wire import MentionRef
from ._envelope import Envelope
from ._shared import Forward

__all__ = ["ForwardPort", "turn_for"]


class ForwardPort:
    """Posts on the forward's room; a post refused as stopped cancels the forward."""

    __slots__ = ("_agent_id", "_forward", "_rest", "_room_id")

    def __init__(self, rest: RestClient, agent_id: str, room_id: str, forward: Forward) -> None:
        self._rest = rest
        self._agent_id = agent_id
        self._room_id = room_id
        self._forward = forward

    async def history(self) -> list[Message]:
        listed = await self._rest.history(self._room_id)
        return [inbound(self._room_id, self._agent_id, wire).message for wire in listed]

    async def participants(self) -> list[Participant]:
        listed = await self._rest.participants(self._room_id)
        return [
            Participant(id=p.id, type=p.type, role=p.role, name=p.name, handle=p.handle)
            for p in listed
        ]

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        refs = [MentionRef(id=target) for target in mentions]
        try:
            posted = await self._rest.post_message(self._room_id, content, refs)
        except errors.ExecutionStoppedError as exc:
            await self._stopped(exc)
            raise
        return posted.id

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        try:
            created = await self._rest.post_event(self._room_id, content, message_type, metadata)
        except errors.ExecutionStoppedError as exc:
            await self._stopped(exc)
            raise
        return created.id

    async def _stopped(self, exc: errors.ExecutionStoppedError) -> None:
        self._forward.cancel("platform_stop", exc.message)
        await trio.lowlevel.checkpoint()  # raises Cancelled: we are inside its scope


def turn_for(
    envelope: Envelope, message: Message | None, forward: Forward, rest: RestClient
) -> Turn:
    """The contract `Turn` a target runs one forward in. An event that is not a
    message gets a stand-in message naming the event (what `run_command` and the
    remote-stop bookkeeping need: a room and an id)."""
    room_id = envelope.room_id or ""
    if message is None:
        message = Message(
            id=f"{envelope.event_type}:{uuid.uuid4().hex[:12]}",
            room_id=room_id,
            content="",
            sender_id="",
            sender_type="System",
            message_type=envelope.event_type,
        )
    port = ForwardPort(rest, envelope.agent_id, room_id, forward)
    return Turn(message, port, control=forward.control)
