"""The agent's record of remote stops: counts by outcome, and the most recent ones."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from ..contract import RemoteStop, StopOutcome

__all__ = ["RemoteStopLog", "RemoteStopStats"]


@dataclass(frozen=True, slots=True)
class RemoteStopStats:
    """How the remote stops of an agent ended, over all its runs (`Agent.remote_stops`)."""

    confirmed: int
    requested: int
    unconfirmed: int
    recent: tuple[RemoteStop, ...]
    """The last stops, oldest first (at most `RemoteStopLog.keep`)."""

    @property
    def sent(self) -> int:
        return self.confirmed + self.requested + self.unconfirmed


class RemoteStopLog:
    """Kept by the agent, written by each turn as it ends."""

    keep = 100

    def __init__(self) -> None:
        self._counts = dict.fromkeys(StopOutcome, 0)
        self._recent: deque[RemoteStop] = deque(maxlen=self.keep)

    def add(self, stops: Iterable[RemoteStop]) -> None:
        for stop in stops:
            self._counts[stop.outcome] += 1
            self._recent.append(stop)

    @property
    def stats(self) -> RemoteStopStats:
        return RemoteStopStats(
            confirmed=self._counts[StopOutcome.CONFIRMED],
            requested=self._counts[StopOutcome.REQUESTED],
            unconfirmed=self._counts[StopOutcome.UNCONFIRMED],
            recent=tuple(self._recent),
        )
