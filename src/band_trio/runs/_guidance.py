"""Guidance offered to a run over HTTP (`POST /v1/runs/{id}/steer`), as a room's steer.

A room that steers offers the messages that arrive while its turn runs to that
turn (`Turn.take_guidance`); a run has no room, so its client offers them:
each steer is a `contract.Message` from the API client, queued here until the
adapter takes it (`take`) or waits for one (`wait`). What the run never took is
handed back on its terminal event and status as `pending_steer`, Hermes' field
(NousResearch/hermes-agent `gateway/platforms/api_server_runs.py` @ 005b4b7:
its agent's undelivered steer text, a string, on `run.completed`), so a client
can send it as the session's next input rather than lose it.

The queue is bounded twice (`RunsPolicy.max_guidance_per_run` messages waiting,
`max_guidance_chars` each): a client cannot grow a run's memory by steering.
"""

from __future__ import annotations

from collections import deque

import trio

from ..contract import Message

__all__ = ["Guidance", "GuidanceFull"]


class GuidanceFull(Exception):
    """As many messages as the policy allows are waiting to be taken: a 429."""


class Guidance:
    """The guidance waiting for one run, oldest first."""

    __slots__ = ("_changed", "_count", "_limit", "_queue", "_room_id", "_run_id", "taken")

    def __init__(self, run_id: str, room_id: str, limit: int) -> None:
        self._run_id = run_id
        self._room_id = room_id
        self._limit = limit
        self._queue: deque[Message] = deque()
        self._changed = trio.Event()
        self._count = 0
        self.taken = 0
        """Messages the run took (for its status and tests)."""

    def offer(self, text: str) -> Message:
        """Queue `text` as a message from the API client. Raises `GuidanceFull`."""
        if len(self._queue) >= self._limit:
            raise GuidanceFull
        self._count += 1
        message = Message(
            id=f"{self._run_id}-g{self._count}",
            room_id=self._room_id,
            content=text,
            sender_id="user",
            sender_type="User",
            sender_name="API client",
        )
        self._queue.append(message)
        self._changed.set()
        self._changed = trio.Event()
        return message

    def take(self) -> tuple[Message, ...]:
        """Everything waiting, oldest first; it is the run's now."""
        taken = tuple(self._queue)
        self._queue.clear()
        self.taken += len(taken)
        return taken

    async def wait(self) -> None:
        """Return once something is waiting (the caller's scope bounds it)."""
        while not self._queue:
            await self._changed.wait()

    @property
    def leftover(self) -> str | None:
        """What was never taken, one message a line (Hermes' `pending_steer`), or None."""
        return "\n".join(m.content for m in self._queue) or None
