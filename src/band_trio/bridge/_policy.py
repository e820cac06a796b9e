"""The bridge's durations and counts, in one frozen object (docs/how-to/bridge.md).

Code reads these and sets deadlines on scopes; nothing below takes a
`timeout=` argument. The link of each identity keeps using the runtime's
`Policy` (reconnects, heartbeats, REST deadlines), so a bridged identity
looks on the wire like any band-trio agent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..policy import COLLECTOR_THRESHOLD_MAX, ServerPolicy

__all__ = ["BridgePolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BridgePolicy:
    """Durations (seconds) and counts for one bridge. Use `dataclasses.replace()`."""

    max_forwards: int = 32
    """Forwards in flight at once, over every identity and room."""
    max_connects: int = 32
    """Connection attempts in their set-up at once, over every identity: the upgrade,
    the agent's topics joined and the room list read. Start-up and a reconnect after
    an outage go through it alike; a backoff wait never holds a slot, so an identity
    that cannot connect takes one only while an attempt runs (under its deadlines)."""
    forward_connect: float = 5.0
    """Deadline for an HTTP target to accept the connection of one forward."""
    forward_deadline: float = math.inf
    """Deadline of one forward as a whole. None by default: the host keeps a forward's
    request open for its whole turn, and a stop, not a clock, is what ends a turn."""
    target_connections: int = 64
    """Connections an HTTP target's client keeps (above `max_forwards`: a closed one is
    replaced without waiting)."""
    room_queue: int = 1000
    """Units (messages, room and participant events) a room queues behind the one in
    flight. One more drops the queued messages for a `/next` catch-up, which forwards
    the same messages in order (events are kept): a flood costs a bounded queue,
    never a lost message."""
    forwarded_memory: int = 500
    """Message ids each room of an identity remembers as forwarded (its ledger's
    completed ids, as `Policy.completed_memory` for an agent's room), least recent
    dropped. What keeps a forwarded message from coming back is its `processed` on
    the platform; this memory spares the request for a copy pushed again."""
    shutdown_grace: float = 10.0
    """A graceful stop lets forwards in flight finish this long, then cancels them."""
    health_grace: float = 1.0
    """How long the health server (and the host) give open requests when stopping."""
    host_max_body: int = 1024 * 1024
    """The largest envelope the host accepts (a bigger one is answered 413, unread;
    a request without the host's token is refused before any of its body is read)."""
    target_max_body: int = 64 * 1024
    """Bytes of an HTTP target's answer the bridge reads (only its status decides; the
    body is for the log): past it the connection is dropped, and an error status is
    still the forward's failure."""
    host_rooms: int = 1000
    """Rooms the host keeps a ledger for; past it the least recently used idle one is
    forgotten (a message it completed is still not run again: the platform's
    unprocessed list no longer holds it)."""
    host_lookup_pages: int = 10
    """Pages (100 messages each) of a room's unprocessed messages the host reads to find
    the platform's copy of a forwarded message; one not found in them is not run."""
    server: ServerPolicy = field(default_factory=ServerPolicy)
    """How the health server and the host bound what they send."""
    retry_first: float = 1.0
    """A send the target did not take is sent again, within the same forward, this
    long after: a target that was down briefly is not left until a catch-up."""
    retry_max: float = 60.0
    """The delay between two sends of one forward doubles up to this."""
    forward_attempts: int = 5
    """Sends of one forward before it has failed: the bridge (when it settles) marks
    the message `failed` and the room moves on; one bad message must not hold its
    room for ever. The room waits meanwhile (its order holds); an interrupt, a stop
    or a graceful stop ends the wait at once."""
    collector_threshold: int = 50_000
    """`band-trio bridge` only: the garbage collector's first threshold (Python's is
    700), with what is alive once the config is read frozen out of its sight. At a
    thousand identities the default ran a full collection of the whole heap every
    few seconds while starting and stopping (docs/benchmarks.md). A program that runs
    `Bridge` itself keeps its own collector settings."""

    def __post_init__(self) -> None:
        for count in (
            "max_forwards",
            "max_connects",
            "forwarded_memory",
            "forward_attempts",
            "target_connections",
            "host_max_body",
            "host_rooms",
            "host_lookup_pages",
            "target_max_body",
            "collector_threshold",
        ):
            if getattr(self, count) < 1:
                raise ValueError(f"{count} must be at least 1")
        if self.room_queue < 2:
            raise ValueError("room_queue must be at least 2 (a catch-up and a message)")
        if self.collector_threshold > COLLECTOR_THRESHOLD_MAX:
            raise ValueError(
                f"collector_threshold must be at most {COLLECTOR_THRESHOLD_MAX} (a C int)"
            )
        for name in (
            "forward_connect",
            "forward_deadline",
            "shutdown_grace",
            "health_grace",
            "retry_first",
        ):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name} must be > 0, not {value!r}")
        if not self.retry_max >= self.retry_first:
            raise ValueError(
                f"retry_max must be at least retry_first ({self.retry_first!r}), "
                f"not {self.retry_max!r}"
            )
