"""What the pieces of one agent run share: settings passed down, and a journal passed up.

Nothing here reaches back up the tree. The agent creates one `RoomContext`
per run and hands it to every room; rooms and the link report what happened
by writing to the `Journal` and pulsing `Changes`, which the agent reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from ..contract import Adapter, Cutoff, Threads
from ..link import RestClient
from ..policy import BusyPolicy, Policy
from ._results import Overrun
from ._stops import RemoteStopLog

__all__ = ["Changes", "Journal", "RoomContext"]


class Changes:
    """A pulse for "the agent's observable state moved", for `Agent.wait_until`.

    A turn started or ended, a room was added, joined or left, stopped or
    played, a message was queued, the socket connected or closed, a signal was
    applied.
    """

    def __init__(self) -> None:
        self._event = trio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = trio.Event()

    async def wait(self) -> None:
        await self._event.wait()


@dataclass
class Journal:
    """What one run of the agent did that its `StopResult` reports."""

    overran: list[Overrun] = field(default_factory=list)
    """Work that outlived its cleanup grace after being cancelled."""
    cancelled: list[tuple[str, str]] = field(default_factory=list)
    """(room, message) of the turns the shutdown cancelled after its grace."""


@dataclass(frozen=True, slots=True)
class RoomContext:
    """What every room of one agent run shares."""

    agent_id: str
    rest: RestClient
    adapter: Adapter
    policy: Policy
    busy: BusyPolicy
    """What a room does with a message pushed while a turn runs (double texting)."""
    changes: Changes
    journal: Journal
    stops: RemoteStopLog
    """The agent's, across runs: every turn adds its remote stops as it ends."""
    threads: Threads = field(default_factory=lambda: Threads(Policy().adapter_threads))
    """The agent's worker threads (`run_in_thread`), counted across runs."""
    cutoff: Cutoff = field(default_factory=Cutoff)
    """The run's: every shielded wait of its rooms and turns ends by it (a hard stop
    lowers it: `RoomHost.hard_stop`)."""
