"""What the pieces of one agent run share: settings passed down, and a journal passed up.

Nothing here reaches back up the tree. The agent creates one `RoomContext`
per run and hands it to every room; rooms and the link report what happened
by writing to the `Journal` and pulsing `Changes`, which the agent reads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import trio

from ..contract import Adapter, Cutoff, Threads, Turn
from ..link import RestClient
from ..policy import BusyPolicy, Policy
from ._results import Overrun
from ._stops import RemoteStopLog

if TYPE_CHECKING:
    from ._turn_state import ActiveTurn

__all__ = ["Changes", "Journal", "RoomContext", "RoomCounts", "RoomRules", "UnitCall"]

UnitCall = Callable[["ActiveTurn", Turn], Awaitable[None]]
"""A unit's work in its turn's scope, when it is not the adapter's `on_turn`: a bridged
identity's forward (it reads the unit's event and payload off the `ActiveTurn`)."""


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
class RoomRules:
    """Where the rooms of a bridged identity differ from an agent's: every other rule
    (the claim window, the catch-up, overflow, stop, play, leave, shutdown) is one.
    docs/how-to/bridge.md, "The bridge runs the runtime's rooms"."""

    claims: bool = True
    """The runtime claims each message, reports `working`, and marks it. False: the far
    end does all of that (a bridge target with `settle = "target"`: `band-trio host`),
    so the turn only runs the unit's work, and an interrupted message is the work's to
    consume."""
    events: bool = False
    """Room and participant events are units too, queued in order with the messages
    (`Room.offer_event`); never claimed, marked or retried from `/next`."""
    work: Literal["turn", "forward"] = "turn"
    """What a unit is called in the observed work (spans, metrics, the stop's lines)."""
    catches_up: bool = True
    """The room looks for work through `/next` (on a join, a play, an overflow, now and
    then). False: its owner hands it every unit (`Room.submit`: a host serving a
    bridge's forwards, which the bridge's own catch-ups drive)."""
    tells_left: bool = True
    """The adapter's `on_room_left` is called when the room is closed. False: closing
    the room only forgets it (a host dropping an idle room's ledger)."""


@dataclass
class RoomCounts:
    """What every room of one agent (or bridged identity) did, summed (`/health`)."""

    passes: int = 0
    """`/next` catch-ups started (a join, a play, an overflow, a reconcile)."""
    cancelled: int = 0
    """Units an interrupt or stop cut off (in the claim window included)."""
    dropped: int = 0
    """Queued units a stop cleared (pushed messages come back through `/next`)."""
    overflowed: int = 0
    """Times a room's queue was full and dropped for a `/next` catch-up."""


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
    rules: RoomRules = field(default_factory=RoomRules)
    call: UnitCall | None = None
    """A unit's work instead of `adapter.on_turn` (a bridged identity's forward)."""
    counts: RoomCounts = field(default_factory=RoomCounts)
