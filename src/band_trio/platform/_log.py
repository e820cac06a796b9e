"""The request log, the counters, and the change signal behind `wait_until`.

The log is what benchmarks read latencies from, so an entry is a stamp and a
few strings appended to a ring: no formatting, no I/O. The ring keeps the last
`PlatformPolicy.log_entries` entries and cuts each body or frame to
`log_text_limit` characters, so a long run, or a client posting huge bodies,
holds a flat memory line. Every append (and every other state change) wakes
the tasks blocked in `Platform.wait_until`, which is how tests wait for an
effect without polling.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter, deque
from typing import Literal

import trio

from ..wire.admin import AdminLogEntry

__all__ = ["Changes", "RequestLog", "logger"]

logger = logging.getLogger("band_trio.platform")

Kind = Literal["rest", "ws_in", "ws_out", "ws_open", "ws_close", "note"]

COUNTERS = (
    "requests", "errors", "unhandled_routes", "upgrades_refused", "connections_opened",
    "connections_closed", "superseded", "ws_frames_in", "ws_frames_out", "bad_frames",
    "frame_errors", "socket_errors", "joins_refused", "unhandled_events", "pushes",
    "pushes_unjoined", "pushes_offline", "faults", "faults_rest_failed", "faults_rest_held",
    "faults_rest_delayed", "faults_rest_dropped", "faults_sockets_dropped",
    "faults_sockets_closed", "faults_upgrades_refused", "faults_joins_refused",
    "faults_heartbeats_dropped", "faults_superseded", "faults_reopens_refused",
    "bodies_too_large", "log_evicted", "reopened", "socket_backpressure", "sockets_stalled",
    "sockets_overflowed",
)  # fmt: skip
"""Counters reported from the start, at 0, so a reader can rely on every key."""


class Changes:
    """A level-triggered "something changed" signal: `wait()` returns after the next `notify()`."""

    def __init__(self) -> None:
        self._event = trio.Event()
        self.version = 0
        """Counts `notify()` calls: a reader that compares it before and after its own
        awaits knows whether it missed a change, which the event alone cannot tell."""
        self._waiting = 0
        """Tasks in `wait()`: counted here, since `notify` runs several times a request
        and `Event.statistics()` allocates."""

    def notify(self) -> None:
        self.version += 1
        if self._waiting:
            self._event.set()
            self._event = trio.Event()

    async def wait(self) -> None:
        self._waiting += 1
        try:
            await self._event.wait()
        finally:
            self._waiting -= 1


class RequestLog:
    """A bounded log of REST requests and websocket frames, plus named counters.

    Entries keep their `seq` (0, 1, 2, ... for the platform's lifetime) when older
    ones are evicted, so `since(seq)` still means "everything from `seq` on that
    is still held"; `next_seq` is where a reader continues."""

    def __init__(self, changes: Changes, *, entries: int = 20_000, text_limit: int = 1024) -> None:
        self.entries: deque[AdminLogEntry] = deque(maxlen=entries)
        self.stats: Counter[str] = Counter(dict.fromkeys(COUNTERS, 0))
        self.next_seq = 0
        self._text_limit = text_limit
        self._changes = changes

    def append(
        self,
        kind: Kind,
        t: float,
        *,
        agent_id: str | None = None,
        method: str | None = None,
        path: str | None = None,
        query: str | None = None,
        status: int | None = None,
        body: str | None = None,
        frame: str | None = None,
    ) -> None:
        if len(self.entries) == self.entries.maxlen:
            self.stats["log_evicted"] += 1
        limit = self._text_limit
        if body is not None and len(body) > limit:
            body = f"{body[:limit]}... [{len(body)} characters]"
        if query is not None and len(query) > limit:
            query = f"{query[:limit]}... [{len(query)} characters]"
        if frame is not None and len(frame) > limit:
            frame = f"{frame[:limit]}... [{len(frame)} characters]"
        if path is not None and len(path) > limit:
            path = path[:limit]
        self.entries.append(
            AdminLogEntry(
                seq=self.next_seq,
                t=t,
                kind=kind,
                agent_id=agent_id,
                method=method,
                path=path,
                query=query,
                status=status,
                body=body,
                frame=frame,
            )
        )
        self.next_seq += 1
        self._changes.notify()

    def since(self, seq: int) -> list[AdminLogEntry]:
        """The entries from `seq` on that the ring still holds.

        A reader that keeps up asks for the last few entries of a long ring: they
        are taken from its right end, in time proportional to how many there are,
        not to the ring's length (a deque is walked from one end)."""
        if not self.entries:
            return []
        skip = max(seq - self.entries[0].seq, 0)
        count = len(self.entries) - skip
        if count <= 0:
            return []
        if count < skip:
            tail = list(itertools.islice(reversed(self.entries), count))
            tail.reverse()
            return tail
        return list(itertools.islice(self.entries, skip, None))

    def count(self, name: str, n: int = 1) -> None:
        self.stats[name] += n
