"""The `contract.TurnPort` of one turn: what the adapter's `Turn` posts go through."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import trio

from .. import errors
from ..contract import Message, Participant
from ..link import RestClient
from ..wire import MentionRef
from ._inbound import inbound
from ._turn_state import AbortKind, ActiveTurn

__all__ = ["PlatformPort"]

log = logging.getLogger("band_trio.runtime.turn")


class PlatformPort:
    """The `contract.TurnPort` of one turn: posts on the room's behalf.

    A post refused by the stopped gate (`ExecutionStoppedError`) aborts the turn
    as a platform stop: the adapter sees `Cancelled`, and the message is left
    for replay.
    """

    __slots__ = ("_agent_id", "_rest", "_turn")

    def __init__(self, rest: RestClient, turn: ActiveTurn, agent_id: str) -> None:
        self._rest = rest
        self._turn = turn
        self._agent_id = agent_id

    async def history(self) -> list[Message]:
        room_id = self._turn.message.room_id
        listed = await self._rest.history(room_id)
        return [inbound(room_id, self._agent_id, wire).message for wire in listed]

    async def participants(self) -> list[Participant]:
        listed = await self._rest.participants(self._turn.message.room_id)
        return [
            Participant(id=p.id, type=p.type, role=p.role, name=p.name, handle=p.handle)
            for p in listed
        ]

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        refs = [MentionRef(id=target) for target in mentions]
        try:
            posted = await self._rest.post_message(self._turn.message.room_id, content, refs)
        except errors.ExecutionStoppedError as exc:
            await self._aborted_by_platform(exc)
            raise
        return posted.id

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        room_id = self._turn.message.room_id
        try:
            created = await self._rest.post_event(room_id, content, message_type, metadata)
        except errors.ExecutionStoppedError as exc:
            await self._aborted_by_platform(exc)
            raise
        return created.id

    async def _aborted_by_platform(self, exc: errors.ExecutionStoppedError) -> None:
        log.info(
            "room %s: platform refused a post as stopped; aborting the turn",
            self._turn.message.room_id,
        )
        self._turn.abort(AbortKind.PLATFORM_STOP, exc.message)
        await trio.lowlevel.checkpoint()  # raises Cancelled: we are inside the turn's scope
