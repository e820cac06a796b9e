"""Per-room bookkeeping of attempts and completions (sans-IO).

The ledger answers one question before each turn: what may be done with this
message? Run it, only retry its final mark (ack-pending: the adapter already
finished with it, and `processed` — or `failed` with its label — did not land),
or nothing (completed, or its retry budget is spent).
It is what guarantees that the adapter never runs twice for one message in
one process, whichever path (push, backlog, reconcile, replay) brings it.
"""

from __future__ import annotations

import enum
from collections import OrderedDict

__all__ = ["Ledger", "OwnPosts", "Standing"]


class Standing(enum.Enum):
    RUNNABLE = "runnable"
    ACK_PENDING = "ack_pending"
    COMPLETED = "completed"
    EXHAUSTED = "exhausted"


class OwnPosts:
    """The ids of the agent's own posts in one room that this process knows of (the
    newest `memory`): the posts reconciliation may not take for a new one."""

    __slots__ = ("_ids", "_memory")

    def __init__(self, memory: int) -> None:
        self._memory = memory
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, post_id: str) -> None:
        self._ids[post_id] = None
        self._ids.move_to_end(post_id)
        while len(self._ids) > self._memory:
            self._ids.popitem(last=False)

    def __contains__(self, post_id: object) -> bool:
        return post_id in self._ids


class Ledger:
    """Attempts charged per message, ack-pending ids and an LRU of completed ids."""

    def __init__(self, *, max_attempts: int, memory: int) -> None:
        self._max_attempts = max_attempts
        self._memory = memory
        self._attempts: dict[str, int] = {}
        self._pending: dict[str, str | None] = {}
        """Ack-pending ids -> the failure label to mark, or None to mark `processed`."""
        self._unclaimed: set[str] = set()
        """Ack-pending ids whose claim opened no attempt (refused as stopped, or failed):
        their mark needs a claim first, and no mark of ours can have landed yet."""
        self._completed: OrderedDict[str, None] = OrderedDict()
        self.own_posts = OwnPosts(memory)
        """The room's posts of ours this process knows of (`_posts`: never taken for
        a post whose answer was lost)."""

    def standing(self, message_id: str) -> Standing:
        if message_id in self._completed:
            return Standing.COMPLETED
        if message_id in self._pending:
            return Standing.ACK_PENDING
        if self._attempts.get(message_id, 0) >= self._max_attempts:
            return Standing.EXHAUSTED
        return Standing.RUNNABLE

    def attempts(self, message_id: str) -> int:
        return self._attempts.get(message_id, 0)

    def spent_on_platform(self, message_id: str, attempts: int) -> None:
        """The platform shows the message `failed` after `attempts` attempts: they count
        here too, so a restarted agent never claims a message that used its budget (a
        claim of a `failed` message opens a new attempt) and posts no second error
        event for it. Completed or ack-pending messages are left as they are."""
        if message_id in self._completed or message_id in self._pending:
            return
        if attempts > self._attempts.get(message_id, 0):
            self._attempts[message_id] = attempts

    def charge(self, message_id: str) -> None:
        """One attempt is being spent (before the claim)."""
        self._attempts[message_id] = self._attempts.get(message_id, 0) + 1

    def refund(self, message_id: str) -> None:
        """Give one attempt back: our own interrupt/stop, a refused or stopped claim."""
        left = self._attempts.get(message_id, 0) - 1
        if left > 0:
            self._attempts[message_id] = left
        else:
            self._attempts.pop(message_id, None)

    def ack_pending(
        self, message_id: str, failure: str | None = None, *, claimed: bool = True
    ) -> None:
        """The adapter is done with it (or an interrupt consumed it); only the final
        mark is outstanding: `processed`, or `failed` with `failure` as its label.
        `claimed`: an attempt of ours was opened for it (False: the mark must claim)."""
        self._pending[message_id] = failure
        if claimed:
            self._unclaimed.discard(message_id)
        else:
            self._unclaimed.add(message_id)

    def pending_claimed(self, message_id: str) -> bool:
        """Whether the outstanding mark of `message_id` has an attempt of ours to end."""
        return message_id not in self._unclaimed

    def pending_marks(self) -> list[tuple[str, str | None]]:
        """Every ack-pending id with the failure label its mark carries (None: `processed`)."""
        return list(self._pending.items())

    def pending_failure(self, message_id: str) -> str | None:
        """The label of an outstanding `failed` mark (None: the mark is `processed`)."""
        return self._pending.get(message_id)

    def failed(self, message_id: str) -> None:
        """The `failed` mark landed: the message stays exhausted, never run again."""
        self._pending.pop(message_id, None)
        self._unclaimed.discard(message_id)

    def complete(self, message_id: str) -> None:
        """The `processed` mark landed: never touch this message again."""
        self._pending.pop(message_id, None)
        self._unclaimed.discard(message_id)
        self._attempts.pop(message_id, None)
        self._completed[message_id] = None
        self._completed.move_to_end(message_id)
        while len(self._completed) > self._memory:
            self._completed.popitem(last=False)
