"""What leaving a room does: its topics left on their connection, its adapter told.

Shared by every room of the runtime (and so by a bridged identity's), run by
the rooms host after a room's task ended, each part bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from ..contract import Adapter, adapter_failure
from ..link import Socket
from ..policy import Policy

__all__ = ["chat_topic", "defines_room_left", "leave_topics", "participants_topic", "tell_left"]

log = logging.getLogger("band_trio.runtime.room")


def chat_topic(room_id: str) -> str:
    return f"chat_room:{room_id}"


def participants_topic(room_id: str) -> str:
    return f"room_participants:{room_id}"


async def tell_left(
    room_id: str, what: str, hook: Callable[[str], Awaitable[object]], policy: Policy
) -> None:
    """`hook(room_id)` (an adapter's `on_room_left`, a target's `room_left`) under the
    hook deadline; its failure, or overrunning, is logged (`what` names it)."""
    with trio.move_on_after(policy.hook_deadline) as bounded:
        try:
            await hook(room_id)
        except BaseException as exc:
            if not adapter_failure(exc):
                raise
            log.warning("room %s: %s failed: %r", room_id, what, exc)
    if bounded.cancelled_caught:
        log.warning("room %s: %s ran past its %gs deadline", room_id, what, policy.hook_deadline)


def defines_room_left(adapter: Adapter) -> bool:
    """Whether `adapter` has an `on_room_left` other than the base one (a no-op)."""
    own = getattr(adapter, "__dict__", {})
    return type(adapter).on_room_left is not Adapter.on_room_left or "on_room_left" in own


async def leave_topics(socket: Socket | None, room_id: str, policy: Policy) -> None:
    """Leave a room's topics on the connection they were joined on, if it is still
    open, under the cleanup grace (a left room, after its task ended)."""
    if socket is not None and not socket.closed.is_set():
        with trio.move_on_after(policy.cleanup_grace):
            await socket.leave(chat_topic(room_id))
            await socket.leave(participants_topic(room_id))
