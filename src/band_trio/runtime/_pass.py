"""One catch-up pass through `/next`, handing the room one message at a time.

A pass asks `/next` for the room's oldest message not yet processed for this
agent, hands it out as work, and asks again once that unit is done, until
`/next` is empty or reaches a message already queued from a push (the sync
point: pushes take it from there, in order). A head that can never move on in
this process — the agent's own, completed, out of attempts (in this process, or
`failed` on the platform after as many attempts as the policy allows), or only
waiting for its final mark — would come back from every `/next` and hide the messages
behind it; the pass then walks the room's unprocessed list once, page by
page, past it, instead of spinning.

The pass only fetches and decides; the room runs each unit and reports back
(`outcome`). Every fetch runs inside the room's search scope, so a stop or a
drain cuts it short.
"""

from __future__ import annotations

import logging
from collections import deque

from .. import errors
from ..contract import Message
from ..wire import ChatMessage
from ._context import RoomContext
from ._inbound import Inbound, inbound
from ._ledger import Ledger, Standing
from ._pages import Pages

__all__ = ["Pass", "is_own"]

log = logging.getLogger("band_trio.runtime.room")


def is_own(message: Message, agent_id: str) -> bool:
    return message.sender_type == "Agent" and message.sender_id == agent_id


class Pass:
    """Where one catch-up stands; `next()` until it returns None."""

    def __init__(
        self, room_id: str, context: RoomContext, ledger: Ledger, queued: set[str]
    ) -> None:
        self._room_id = room_id
        self._ctx = context
        self._ledger = ledger
        self._queued = queued
        """The room's live set of message ids queued from pushes (the sync point)."""
        self.found_work: bool | None = None
        """Whether `/next` had a message at any step (None: the pass never asked)."""
        self._scanning = False
        self._handed: str | None = None
        self._moved = True
        self._page: deque[ChatMessage] = deque()
        self._pages = Pages(context.policy.scan_pages, f"room {room_id}: the catch-up's scan")

    def outcome(self, message_id: str, moved: bool) -> None:
        """The unit for `message_id` is done; `moved`: its platform state moved on."""
        if message_id == self._handed:
            self._moved = moved

    async def next(self) -> Inbound | None:
        """The pass's next message, or None once the pass is over."""
        if not self._scanning:
            handed, self._handed = self._handed, None
            if handed is not None and not self._moved:
                # No progress: the same head would come back. If it can only wait
                # for its final mark, serve the messages behind it meanwhile.
                if self._ledger.standing(handed) is not Standing.ACK_PENDING:
                    return None
                self._scanning = True
        if not self._scanning:
            try:
                head = await self._ctx.rest.next_message(self._room_id)
            except errors.PlatformError as exc:
                log.warning(
                    "room %s: /next failed (%s); the next reconcile retries", self._room_id, exc
                )
                return None
            self.found_work = bool(self.found_work) or head is not None
            if head is None:
                return None
            item = inbound(self._room_id, self._ctx.agent_id, head)
            message = self._noted(item)
            if message.id in self._queued:
                return None  # the sync point
            if not self._stuck(message):
                self._handed, self._moved = message.id, True
                return item
            self._scanning = True
        return await self._scan()

    async def _scan(self) -> Inbound | None:
        while True:
            while self._page:
                item = inbound(self._room_id, self._ctx.agent_id, self._page.popleft())
                self._noted(item)
                if item.message.id in self._queued:
                    return None
                if not item.processed and not self._stuck(item.message):
                    return item
            pages = self._pages
            if not pages.more:
                return None
            try:
                page = await self._ctx.rest.unprocessed(self._room_id, pages.cursor)
            except errors.PlatformError as exc:
                log.warning("room %s: scan failed (%s)", self._room_id, exc)
                return None
            self._page.extend(page.data)
            pages.advance(page.metadata)

    def _noted(self, item: Inbound) -> Message:
        """`item`'s message, once the ledger knows the attempts the platform counts."""
        if item.failed_attempts:
            self._ledger.spent_on_platform(item.message.id, item.failed_attempts)
        return item.message

    def _stuck(self, message: Message) -> bool:
        standing = self._ledger.standing(message.id)
        return is_own(message, self._ctx.agent_id) or standing in (
            Standing.EXHAUSTED,
            Standing.COMPLETED,
        )
