"""What `Agent.stop()` reports: the public result types of a run's end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Overrun", "StopResult", "UnsettledMark"]


@dataclass(frozen=True, slots=True)
class Overrun:
    """Work that outlived its grace after being told to stop."""

    room_id: str
    message_id: str | None
    what: str


@dataclass(frozen=True, slots=True)
class UnsettledMark:
    """A message whose adapter finished but whose final mark never landed.

    The runtime kept it ack-pending: a later run of this `Agent` retries only the
    mark. A new process will see the message as still `processing`."""

    room_id: str
    message_id: str
    mark: Literal["processed", "failed"]


@dataclass(frozen=True, slots=True)
class StopResult:
    """What `Agent.stop()` found."""

    graceful: bool
    """True if every running turn finished within the shutdown grace and nothing
    outlived its cleanup grace."""
    cancelled: tuple[tuple[str, str], ...] = ()
    """(room id, message id) of each turn cancelled after the grace; left `processing`."""
    overran: tuple[Overrun, ...] = ()
    """Work that outlived its cleanup grace after being cancelled (during the run or the
    stop). `run()` still owns it and returns only once it has ended."""
    unsettled: tuple[UnsettledMark, ...] = ()
    """Final marks that could not be delivered (the platform refused or was away)."""
