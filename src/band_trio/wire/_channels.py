"""Join-ref bookkeeping for one websocket connection (sans-IO).

Phoenix V2 pushes carry the `join_ref` of the client's *current* join of their
topic; anything else is stale (an older join, an older connection) and must be
dropped. Refs come from one counter per link, never reset on reconnect, so a
ref from an old connection can never collide with a new one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ._frames import Frame, encode_frame

__all__ = ["HEARTBEAT_TOPIC", "Channels", "RefCounter"]

HEARTBEAT_TOPIC = "phoenix"


class RefCounter:
    """Hands out "1", "2", ... for joins, leaves and heartbeats of every connection."""

    def __init__(self) -> None:
        self._count: Iterator[int] = itertools.count(1)

    def next(self) -> str:
        return str(next(self._count))


class Channels:
    """Which topics are joined on one connection, under which `join_ref`."""

    def __init__(self, refs: RefCounter) -> None:
        self._refs = refs
        self._joined: dict[str, str] = {}

    def join_frame(self, topic: str) -> tuple[str, str]:
        """A `phx_join` frame for `topic`: returns `(ref, text)`; `join_ref == ref`."""
        ref = self._refs.next()
        return ref, encode_frame(ref, ref, topic, "phx_join", {})

    def leave_frame(self, topic: str) -> tuple[str, str] | None:
        """A `phx_leave` for a joined topic (forgetting it), or None if not joined."""
        join_ref = self._joined.pop(topic, None)
        if join_ref is None:
            return None
        ref = self._refs.next()
        return ref, encode_frame(join_ref, ref, topic, "phx_leave", {})

    def heartbeat_frame(self) -> tuple[str, str]:
        ref = self._refs.next()
        return ref, encode_frame(None, ref, HEARTBEAT_TOPIC, "heartbeat", {})

    def joined(self, topic: str, join_ref: str) -> None:
        """Record an acknowledged join."""
        self._joined[topic] = join_ref

    def forget(self, topic: str) -> None:
        self._joined.pop(topic, None)

    def is_joined(self, topic: str) -> bool:
        return topic in self._joined

    def topics(self) -> list[str]:
        return list(self._joined)

    def is_current(self, frame: Frame) -> bool:
        """True for a push on a joined topic that carries that join's `join_ref`."""
        return frame.join_ref is not None and self._joined.get(frame.topic) == frame.join_ref
