"""What the platform saw, indexed as it happens: the driver's half of every interval.

The platform stamps each REST request on entry and each outgoing frame just
before it is written (`time.perf_counter()`). `LogWatch` reads the request
log incrementally from a cursor and files each entry under a key — the
control frames sent to an agent, a message's marks, a room's `/next` calls,
`working: false` reports, join replies — so that a trial asks "the first such stamp
after position N" in constant time, however busy the other rooms are. A
waiter for one stamp re-reads the log after every platform change
(`Platform.wait_until`); a wait for thousands (a start-up, a wave) checks every
few milliseconds instead (`_bench.poll`), not to slow the platform it measures,
which shares the driver's process; entries the ring evicted before they were read are
counted in `lost`, and a run with any reports it.
"""

from __future__ import annotations

import json
from collections import defaultdict

from ..platform import Platform
from ..wire.admin import AdminLogEntry

__all__ = ["Key", "LogWatch"]

Key = tuple[str, ...]


class LogWatch:
    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.cursor = platform.request_log.next_seq
        self.lost = 0
        self._stamps: dict[Key, list[tuple[int, float]]] = defaultdict(list)
        self.joined: dict[str, dict[str, float]] = defaultdict(dict)
        """Per agent: the platform's first `ok` reply to each room's `room_participants`
        join (stamp), the second of its two topics: the room is joined."""
        self.synced: dict[str, dict[str, float]] = defaultdict(dict)
        """Per agent: each room's first `GET /next` (stamp)."""

    @property
    def position(self) -> int:
        """Where the log stands now: stamps after this are "from now on"."""
        return self.platform.request_log.next_seq

    def pump(self) -> None:
        """Index every entry appended since the last call (nothing to do if none was)."""
        if self.platform.request_log.next_seq == self.cursor:
            return
        entries = self.platform.log(self.cursor)
        if entries and entries[0].seq > self.cursor:
            self.lost += entries[0].seq - self.cursor
        for entry in entries:
            for key in _keys(entry):
                if key[0] == "join":
                    self.joined[key[1]].setdefault(key[2], entry.t)
                elif key[0] == "next":
                    self.synced[key[1]].setdefault(key[2], entry.t)
                self._stamps[key].append((entry.seq, entry.t))
        if entries:
            self.cursor = entries[-1].seq + 1

    def first_after(self, key: Key, position: int) -> float | None:
        self.pump()
        for seq, t in self._stamps.get(key, ()):
            if seq >= position:
                return t
        return None

    def stamps(self, key: Key) -> list[float]:
        self.pump()
        return [t for _, t in self._stamps.get(key, ())]

    def seen(self, key: Key) -> bool:
        self.pump()
        return key in self._stamps

    def indexed(self, key: Key) -> bool:
        """`seen` without reading the log first: for a loop over many keys after one `pump`."""
        return key in self._stamps

    async def wait(self, key: Key, position: int = 0) -> float:
        """The first stamp filed under `key` at log position `position` or later."""
        found: list[float] = []

        def ready() -> bool:
            t = self.first_after(key, position)
            if t is not None:
                found.append(t)
            return t is not None

        await self.platform.wait_until(ready)
        return found[0]

    def forget(self, prefix: str) -> None:
        """Drop every key starting with `prefix` (a finished scenario's index)."""
        for key in [k for k in self._stamps if k[0] == prefix]:
            del self._stamps[key]


def _keys(entry: AdminLogEntry) -> list[Key]:
    agent = entry.agent_id or ""
    if entry.kind == "ws_out":
        frame = entry.frame or ""
        if '"agent.control"' in frame:
            return [("control", agent)]
        if '"phx_reply"' in frame and '"room_participants:' in frame:
            room = _joined(frame)
            return [("join", agent, room)] if room else []
        return []
    if entry.kind == "ws_open" and entry.status == 101:
        return [("connected", agent)]
    if entry.kind != "rest" or entry.path is None:
        return []
    parts = entry.path.strip("/").split("/")
    # api/v1/agent/chats/{room}/messages/{id}/{mark} | .../messages/next | .../activity
    if len(parts) < 6 or parts[3] != "chats":
        return []
    room = parts[4]
    if entry.method == "GET" and parts[5:] == ["messages", "next"]:
        return [("next", agent, room)]
    if entry.method == "POST" and len(parts) == 8 and parts[5] == "messages":
        return [(parts[7], parts[6])]  # ("processed", message id), ...
    if entry.method == "POST" and parts[5:] == ["activity"] and not _working(entry.body):
        return [("idle", agent, room)]
    return []


def _joined(frame: str) -> str | None:
    """The room an `ok` reply to a `room_participants` join is for, else None."""
    try:
        _, _, topic, event, payload = json.loads(frame)
        ok = event == "phx_reply" and payload.get("status") == "ok"
    except (ValueError, TypeError, AttributeError):
        return None
    if not ok or not isinstance(topic, str) or not topic.startswith("room_participants:"):
        return None
    return topic.partition(":")[2]


def _working(body: str | None) -> bool:
    try:
        return bool(json.loads(body or "{}").get("working"))
    except (ValueError, AttributeError):
        return True
