"""One websocket's outbound queue: backpressure for its own requests, none for fan-out.

What a socket is sent comes from two places, and a full queue treats them apart
(docs/reference/platform.md, "Backpressure"):

* **Replies** (heartbeats, joins, leaves) answer the client's own frames. The
  socket's reader waits for room (`wait_room`) before it reads the next frame,
  so a client that pipelines more than the queue holds is read as fast as it
  reads what it is sent — hypercorn stops reading its TCP stream, and TCP
  pushes back on the client. A wait is cut off (`Stalled`) only when nothing
  was sent to the client for `PlatformPolicy.outbound_stall`: a client that
  stopped reading, judged by time, not by how much it asked for.
* **Pushes** (what other agents' and users' activity fans out) never wait: the
  REST call or admin call behind them must not block on anyone's socket. They
  are queued past `outbound_queue`, up to `outbound_overflow` more; one more
  means the client fell that far behind the fan-out, and `put` says so (the
  socket is aborted; the agent resyncs through `/next`). While they fill the
  queue, the reader waits too, so they count toward the stall as well.

Frames are counted, not bytes: hypercorn caps each at `max_ws_message`.
"""

from __future__ import annotations

from collections import deque
from typing import Generic, TypeVar

import trio

__all__ = ["Outbox", "Stalled"]

T = TypeVar("T")


class Stalled(Exception):
    """Nothing was sent to the client for the stall limit while the queue was full."""


class Outbox(Generic[T]):
    """A bounded FIFO between a socket's reader (and the hub) and its writer."""

    __slots__ = ("_closed", "_items", "_room", "_sent_at", "_work", "cap", "limit", "stall")

    def __init__(self, limit: int, overflow: int, stall: float) -> None:
        self.limit = limit
        """The reader reads no further frame while this many frames wait."""
        self.cap = limit + overflow
        """No frame is queued past this many: `put` fails."""
        self.stall = stall
        self._items: deque[T] = deque()
        self._closed = False
        self._sent_at = -float("inf")
        self._room = trio.lowlevel.ParkingLot()
        self._work = trio.lowlevel.ParkingLot()

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: T) -> bool:
        """Queue `item` without waiting; False if the queue is closed or holds `cap`."""
        if self._closed or len(self._items) >= self.cap:
            return False
        self._items.append(item)
        if self._work:
            self._work.unpark()
        return True

    @property
    def closed(self) -> bool:
        return self._closed

    def full(self) -> bool:
        return len(self._items) >= self.limit

    async def wait_room(self) -> bool:
        """Return once fewer than `limit` frames wait: at once (a checkpoint) if they
        do already, True after a wait. Raises `Stalled` if `stall` seconds pass during
        the wait with no frame sent."""
        if not self.full():
            await trio.lowlevel.checkpoint()
            return False
        began = trio.current_time()
        while self.full():
            deadline = max(began, self._sent_at) + self.stall
            if trio.current_time() >= deadline:
                raise Stalled
            with trio.move_on_at(deadline):
                await self._room.park()
        return True

    async def get(self) -> T:
        """The oldest frame, once there is one; `trio.EndOfChannel` once closed."""
        if self._items:
            await trio.lowlevel.checkpoint()  # one task takes frames: it is still there
        while not self._items:
            if self._closed:
                raise trio.EndOfChannel
            await self._work.park()
        item = self._items.popleft()
        if self._room and len(self._items) < self.limit:
            self._room.unpark_all()
        return item

    def sent(self) -> None:
        """The writer handed a frame to the client's stream: the client is reading."""
        self._sent_at = trio.current_time()

    def close(self) -> None:
        """Queue nothing more; the writer ends once it has taken what is queued."""
        self._closed = True
        self._work.unpark_all()
