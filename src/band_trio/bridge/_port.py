"""The contract `Turn` a target runs one forward in.

Its posts (a target that speaks in the room: the A2A target posting its agent's
answer) go through the runtime's `PlatformPort`, as the identity: a post refused
as stopped aborts the forward, as it aborts an agent's turn."""

from __future__ import annotations

import uuid

from ..contract import Message, Turn
from ..link import RestClient
from ..policy import Policy
from ..runtime._parts import OwnPosts, PlatformPort
from ._envelope import Envelope
from ._shared import Forward

__all__ = ["turn_for"]


def turn_for(
    envelope: Envelope,
    message: Message | None,
    forward: Forward,
    rest: RestClient,
    *,
    policy: Policy,
    known: OwnPosts,
) -> Turn:
    """The contract `Turn` a target runs one forward in. An event that is not a
    message gets a stand-in message naming the event (what `run_command` and the
    remote-stop bookkeeping need: a room and an id). Its posts land once, as a
    turn's do (`known`: the room's posts of the identity this process knows of)."""
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
    since = message.inserted_at
    port = PlatformPort(rest, forward, envelope.agent_id, policy=policy, since=since, known=known)
    return Turn(message, port, control=forward.control)
