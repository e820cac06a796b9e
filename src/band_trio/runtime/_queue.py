"""A room's units waiting behind the one in hand (sans-IO).

Three kinds wait in one queue, in arrival order:

* pushed messages — at most `Policy.room_inbox`, and remembered by id, since the
  first of them is the `/next` pass's sync point (`_pass`). They can always be
  dropped for a catch-up: `/next` brings them back, in order;
* room and participant events (a bridged identity's rooms) — no `/next` brings
  them back, so a drop keeps them (the oldest go only if they alone fill it);
* units the room's owner submitted (a host's forwards) — each has a request
  waiting for it, so a drop keeps them too.
"""

from __future__ import annotations

from collections import deque

from ._inbound import MESSAGE, Inbound, Submitted

__all__ = ["RoomQueue"]


class RoomQueue:
    """The units waiting in one room; `ids` are the queued messages' (the sync point)."""

    __slots__ = ("_items", "ids")

    def __init__(self) -> None:
        self._items: deque[Inbound] = deque()
        self.ids: set[str] = set()
        """The pushed messages queued, by id: the pass stops at the first of them."""

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, item: Inbound) -> None:
        self._items.append(item)
        if _droppable(item):
            self.ids.add(item.message.id)

    def pop(self) -> Inbound:
        item = self._items.popleft()
        self.ids.discard(item.message.id)
        return item

    def drop_messages(self, cap: int | None = None) -> int:
        """Drop the pushed messages (a catch-up brings them back); keep the rest, at
        most `cap - 1` of them (the oldest events go first). How many went."""
        before = len(self._items)
        if before:
            kept = deque(item for item in self._items if not _droppable(item))
            while cap is not None and len(kept) >= cap and kept:
                kept.popleft()
            self._items = kept
        self.ids.clear()
        return before - len(self._items)

    def holds(self, item: Inbound) -> bool:
        """Whether a pushed message is still queued (a drop takes it and its id)."""
        return item.message.id in self.ids

    def remove(self, item: Inbound) -> bool:
        """Take `item` out (a turn took it as guidance); whether it was still queued."""
        for queued in self._items:
            if queued is item:
                self._items.remove(queued)
                self.ids.discard(item.message.id)
                return True
        return False

    def withdraw(self, unit: Submitted) -> bool:
        """Take a submitted `unit` out if it is still waiting; whether it was."""
        for item in self._items:
            if item.submitted is unit:
                self._items.remove(item)
                return True
        return False

    def waiting(self) -> list[str]:
        """The ids of the units' messages, in order."""
        return [item.message.id for item in self._items]


def _droppable(item: Inbound) -> bool:
    return item.event == MESSAGE and item.submitted is None
