"""Which REST request goes next: marks before everything else, a bounded number at once.

The one gate of the REST client's connections: the lean pool's own
(`_http_pool.HttpPool`), and in front of httpx2's pool when that is used (a proxy, a
test's transport). Two reasons for it, both found at scale (docs/benchmarks.md,
"the scale rows"):

* **Marks first.** After an agent-wide interrupt of a thousand busy rooms,
  a thousand `/processed` marks queued first in, first out behind the rooms'
  `/next` passes, claims and activity reports; the marks that did not go out
  within the cleanup grace were left for a later pass, one grace apart. A
  waiting mark now takes the next free connection before any other waiting
  request, so a mass abort's marks leave in one wave (and a mark's grace counts
  from the moment it has its slot: `Cutoff.queued`).
* **A pool that never queues.** httpcore2's pool re-scans every queued request
  against every connection each time a request is added or ends: quadratic,
  and at 10,000 rooms' first `/next` it was a third of the agent's CPU. The gate
  hands the pool at most as many requests as it has connections, and keeps the
  rest in two FIFO queues of its own, each step O(1).

A slot is handed from a releasing request straight to the next waiter (no
barging), and a waiter cancelled before it got a slot holds none.
"""

from __future__ import annotations

import trio

__all__ = ["Lanes"]


class Lanes:
    """At most `capacity` requests in flight; a waiting urgent one goes first."""

    __slots__ = ("_free", "_normal", "_urgent", "capacity")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._free = capacity
        self._urgent = trio.lowlevel.ParkingLot()
        self._normal = trio.lowlevel.ParkingLot()

    @property
    def in_flight(self) -> int:
        return self.capacity - self._free

    @property
    def waiting(self) -> tuple[int, int]:
        """(urgent, other) requests waiting for a slot."""
        return len(self._urgent), len(self._normal)

    async def acquire(self, *, urgent: bool) -> None:
        """Wait for a slot; pair with `release` in a `finally`.

        No checkpoint when a slot is free: the request that follows has its own, and
        a mark should not wait one scheduling round for nothing."""
        if self._free:  # then nobody waits: a slot freed with a waiter is handed over
            self._free -= 1
            return
        await (self._urgent if urgent else self._normal).park()  # handed a slot by release

    def release(self) -> None:
        """Give the slot to the next urgent waiter, else the next other, else free it."""
        if self._urgent:
            self._urgent.unpark()
        elif self._normal:
            self._normal.unpark()
        else:
            self._free += 1
