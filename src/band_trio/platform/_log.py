"""The request log, the counters, and the change signal behind `wait_until`.

The log is what benchmarks read latencies from, so an entry is a stamp and a
few strings appended to a list: no formatting, no I/O. Every append (and every
other state change) wakes the tasks blocked in `Platform.wait_until`, which is
how tests wait for an effect without polling.
"""

from __future__ import annotations

import logging
from collections import Counter
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
    "faults_rest_delayed", "faults_sockets_dropped", "faults_sockets_closed",
    "faults_upgrades_refused", "faults_joins_refused", "faults_heartbeats_dropped",
    "faults_superseded",
)  # fmt: skip
"""Counters reported from the start, at 0, so a reader can rely on every key."""


class Changes:
    """A level-triggered "something changed" signal: `wait()` returns after the next `notify()`."""

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        if self._event.statistics().tasks_waiting:
            self._event.set()
            self._event = trio.Event()

    async def wait(self) -> None:
        await self._event.wait()


class RequestLog:
    """Append-only log of REST requests and websocket frames, plus named counters."""

    def __init__(self, changes: Changes) -> None:
        self.entries: list[AdminLogEntry] = []
        self.stats: Counter[str] = Counter(dict.fromkeys(COUNTERS, 0))
        self._changes = changes

    def append(
        self,
        kind: Kind,
        t: float,
        *,
        agent_id: str | None = None,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        body: str | None = None,
        frame: str | None = None,
    ) -> None:
        self.entries.append(
            AdminLogEntry(
                seq=len(self.entries),
                t=t,
                kind=kind,
                agent_id=agent_id,
                method=method,
                path=path,
                status=status,
                body=body,
                frame=frame,
            )
        )
        self._changes.notify()

    def since(self, seq: int) -> list[AdminLogEntry]:
        return self.entries[max(seq, 0) :]

    def count(self, name: str, n: int = 1) -> None:
        self.stats[name] += n
