"""The `contract.TurnPort` of one unit of work: what a `Turn`'s posts go through.

One port for the agent's turns and the bridge's forwards (a target that speaks in
the room, like the A2A target posting its agent's answer, posts as the identity)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import trio

from .. import errors
from ..contract import Message, Participant, TurnControl
from ..link import RestClient
from ..policy import Policy
from ..wire import MentionRef, cut_event_content
from ._inbound import inbound
from ._ledger import OwnPosts
from ._posts import Post, post_once, read_through
from ._turn_state import AbortKind

__all__ = ["Abortable", "PlatformPort"]

log = logging.getLogger("band_trio.runtime.turn")


class Abortable(Protocol):
    """The unit a port posts for: an `ActiveTurn`, or a bridge's forward."""

    @property
    def control(self) -> TurnControl: ...

    def abort(self, kind: AbortKind, reason: str | None = None) -> bool: ...


class PlatformPort:
    """The `contract.TurnPort` of one unit: posts on its room's behalf.

    Its reads wait through a platform that went away (`_posts.read_through`), and
    each post lands once (`_posts.post_once`): one whose answer was lost is looked
    for in the room before it is sent again, and the wait for a platform that went
    away is bounded by `Policy.post_wait`. `since` is when the unit's message was
    created (posts of ours before it are never taken for one of this unit's), `known`
    the room's posts this process knows of.

    A post refused by the stopped gate (`ExecutionStoppedError`) aborts the unit
    as a platform stop: the adapter sees `Cancelled`, and the message is left
    for replay.
    """

    __slots__ = ("_agent_id", "_known", "_policy", "_rest", "_room_id", "_since", "_unit")

    def __init__(
        self,
        rest: RestClient,
        unit: Abortable,
        agent_id: str,
        *,
        policy: Policy,
        since: str | None,
        known: OwnPosts,
    ) -> None:
        self._rest = rest
        self._unit = unit
        self._room_id = unit.control.room_id
        self._agent_id = agent_id
        self._policy = policy
        self._since = since
        self._known = known

    async def history(self) -> list[Message]:
        rest, room_id = self._rest, self._room_id
        listed = await read_through(self._policy, room_id, lambda: rest.history(room_id))
        return [inbound(self._room_id, self._agent_id, wire).message for wire in listed]

    async def participants(self) -> list[Participant]:
        rest, room_id = self._rest, self._room_id
        listed = await read_through(self._policy, room_id, lambda: rest.participants(room_id))
        return [
            Participant(id=p.id, type=p.type, role=p.role, name=p.name, handle=p.handle)
            for p in listed
        ]

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        refs = [MentionRef(id=target) for target in mentions]

        async def send() -> str:
            return (await self._rest.post_message(self._room_id, content, refs)).id

        return await self._once(Post("text", content), send)

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        async def send() -> str:
            rest = self._rest
            return (await rest.post_event(self._room_id, content, message_type, metadata)).id

        return await self._once(Post(message_type, cut_event_content(content)), send)

    async def _once(self, post: Post, send: Callable[[], Awaitable[str]]) -> str:
        try:
            return await post_once(
                self._rest, self._policy, room_id=self._room_id, agent_id=self._agent_id,
                post=post, send=send, since=self._since, known=self._known,
            )  # fmt: skip
        except errors.ExecutionStoppedError as exc:
            await self._aborted_by_platform(exc)
            raise

    async def _aborted_by_platform(self, exc: errors.ExecutionStoppedError) -> None:
        log.info(
            "room %s: platform refused a post as stopped; aborting the turn",
            self._room_id,
        )
        self._unit.abort(AbortKind.PLATFORM_STOP, exc.message)
        await trio.lowlevel.checkpoint()  # raises Cancelled: we are inside the turn's scope
