"""A bounded map of the most recently used entries, for the store's hot reads.

A claim or a mark reads the message and this agent's delivery of it, almost
always one posted moments before; from sqlite those two reads cost ~30-40 µs
of a request's cold path, from a dict under 1 µs. Bounded, so a platform that
holds a million messages does not hold them twice: a miss falls back to sqlite.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["Recent"]

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most `size` entries; `put` and a hit make an entry the newest."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
