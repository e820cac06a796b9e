"""The `contract.TurnPort` of one unit of work: what a `Turn`'s posts go through.

One port for the agent's turns and the bridge's forwards (a target that speaks in
the room, like the A2A target posting its agent's answer, posts as the identity)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import trio

from .. import errors
from ..contract import Message, Participant, Question, TurnControl
from ..link import RestClient
from ..policy import Policy
from ..wire import MentionRef, cut_event_content
from ._asking import ask_room
from ._guidance import Guidance
from ._inbound import inbound
from ._ledger import OwnPosts
from ._posts import Post, post_once, read_through
from ._questions import Desk
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

    __slots__ = (
        "_agent_id", "_desk", "_guidance", "_known", "_policy", "_rest", "_room_id",
        "_sender_id", "_since", "_unit",
    )  # fmt: skip

    def __init__(
        self,
        rest: RestClient,
        unit: Abortable,
        agent_id: str,
        *,
        policy: Policy,
        since: str | None,
        known: OwnPosts,
        desk: Desk | None = None,
        guidance: Guidance | None = None,
        sender_id: str = "",
    ) -> None:
        self._rest = rest
        self._unit = unit
        self._room_id = unit.control.room_id
        self._agent_id = agent_id
        self._policy = policy
        self._since = since
        self._known = known
        self._desk = desk
        """The room's questions (None: a unit that cannot ask, a bridge's forward)."""
        self._guidance = guidance
        self._sender_id = sender_id
        """Who sent the unit's message: mentioned by a question anyone may answer."""

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

    async def ask(self, question: Question) -> str:
        if self._desk is None:
            await trio.lowlevel.checkpoint()
            raise errors.CannotAskError("this unit of work cannot ask its room")
        return await ask_room(
            self._desk, question, sender_id=self._sender_id, control=self._unit.control,
            post=self.post_message,
            history=self.history, agent_id=self._agent_id,
        )  # fmt: skip

    def take_guidance(self) -> tuple[Message, ...]:
        return () if self._guidance is None else self._guidance.take()

    async def wait_guidance(self) -> None:
        if self._guidance is None:
            await trio.sleep_forever()  # a room that offers none (not `STEER`)
        else:
            await self._guidance.wait()

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
