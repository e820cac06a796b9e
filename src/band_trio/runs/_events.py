"""The events of one run, kept with ids so that any number of readers can follow them.

Hermes 0.19 hands each run one queue that its single reader pops: a second
reader steals events, and a reader that disconnects loses them (the queue is
dropped, a re-attach is 404). Here a run's events are a log: each event gets
the next id (1, 2, ...) and its wire frame is encoded once, when it is
appended; a reader keeps only the id it has reached and waits on the log's
change event (`wait_changed`), so readers never take anything from each other and a
re-attach with `Last-Event-ID` resumes after that id. The log is bounded
(`RunsPolicy.max_events_per_run`): past it the oldest events are dropped, and
a reader behind them resumes at the first one kept.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from typing import Any

import msgspec
import trio

__all__ = ["TERMINAL_EVENTS", "EventLog"]

TERMINAL_EVENTS = frozenset({"run.completed", "run.failed", "run.cancelled", "run.interrupted"})

_encode = msgspec.json.Encoder().encode


class EventLog:
    """Append-only, bounded, with ids; closed after the run's terminal event."""

    __slots__ = ("_changed", "_frames", "_limit", "closed", "last_event", "last_id", "run_id")

    def __init__(self, run_id: str, limit: int) -> None:
        self.run_id = run_id
        self._limit = limit
        self._frames: deque[tuple[int, bytes]] = deque()
        self._changed = trio.Event()
        self.last_id = 0
        self.last_event: str | None = None
        self.closed = False
        """True once the terminal event is in: readers end after it."""

    def emit(self, name: str, **fields: Any) -> dict[str, Any]:
        """Append `{"event": name, "run_id", "timestamp", **fields}`; wake every reader."""
        if self.closed:
            raise RuntimeError(f"run {self.run_id}: {name} after the run's terminal event")
        event = {"event": name, "run_id": self.run_id, "timestamp": time.time(), **fields}
        data = _encode(event)  # first: an event that fails to encode uses up no id
        self.last_id += 1
        frame = b"id: %d\ndata: %s\n\n" % (self.last_id, data)
        self._frames.append((self.last_id, frame))
        if len(self._frames) > self._limit:
            self._frames.popleft()
        self.last_event = name
        if name in TERMINAL_EVENTS:
            self.closed = True
        self._changed.set()
        self._changed = trio.Event()
        return event

    @property
    def first_id(self) -> int:
        """The id of the oldest event still kept (`last_id + 1` if none is)."""
        return self._frames[0][0] if self._frames else self.last_id + 1

    def after(self, event_id: int) -> list[bytes]:
        """The frames of the kept events with an id above `event_id`, in order."""
        if not self._frames or event_id >= self.last_id:
            return []
        skip = max(0, event_id - self._frames[0][0] + 1)
        if skip > len(self._frames) // 2:  # a reader keeping up: walk from the right end
            count = self.last_id - event_id
            return [frame for _, frame in itertools.islice(reversed(self._frames), count)][::-1]
        return [frame for _, frame in itertools.islice(self._frames, skip, None)]

    def batch(self, event_id: int, max_bytes: int) -> list[tuple[int, bytes]]:
        """(id, frame) of the kept events above `event_id`, in order, as many as fit in
        `max_bytes` (at least one): what one send of a subscriber carries. The frames
        are the log's own bytes; nothing is copied here."""
        if not self._frames or event_id >= self.last_id:
            return []
        skip = max(0, event_id - self._frames[0][0] + 1)
        if skip > len(self._frames) // 2:  # a reader keeping up: walk from the right end
            count = self.last_id - event_id
            pending = list(itertools.islice(reversed(self._frames), count))[::-1]
        else:
            pending = list(itertools.islice(self._frames, skip, skip + max_bytes))
        taken: list[tuple[int, bytes]] = []
        size = 0
        for entry in pending:
            size += len(entry[1])
            if taken and size > max_bytes:
                break
            taken.append(entry)
        return taken

    async def wait_changed(self) -> None:
        """Return at the next append (the caller's deadline bounds it)."""
        await self._changed.wait()
