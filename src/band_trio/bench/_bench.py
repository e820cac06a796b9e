"""What every scenario shares: the platform, its watch, the series, the clock rules.

`Bench` is handed down to each scenario by the run (`_run`); it owns the
series of every metric, so a scenario only says what it measured. Every wait
has a deadline: a trial whose observation does not come in time counts as a
failure of that metric, and the run goes on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import trio

from ..platform import Platform
from ._progress import Progress
from ._results import Series
from ._watch import LogWatch

__all__ = ["Bench", "Options", "poll", "timed"]

T = TypeVar("T")


@dataclass(frozen=True)
class Options:
    """How much to run; `quick()` and `full()` are the two presets."""

    trials: int
    rooms: tuple[int, ...]
    idle_rooms: tuple[int, ...]
    floor_samples: int
    remote_trials: int
    load_rate: float = 25.0
    """Busy messages a second, per agent under test, spread over its busy rooms."""
    settle: float = 0.05
    """How long a turn runs before it is signalled (pacing, not a wait for an event)."""
    deadline: float = 10.0
    """How long one observation may take before the trial counts as a failure."""
    startup_deadline: float = 120.0
    exit_deadline: float = 60.0
    """How long an agent may take to exit after SIGTERM before it is killed."""
    load_deadline: float = 60.0
    """How long every busy room may take to start its first turn, and every busy
    message to settle after a scenario."""
    peer: bool = False
    scenarios: tuple[str, ...] | None = None
    """The signal scenarios to run (`_run.SCENARIOS` names), None for all of them."""
    scale_floor: bool = False
    """Run the scale floor's bare client (`_scale_floor`) at every size, alternating
    with the runtimes: each scale row then has its floor from the same run."""
    mass_trials: int = 3
    """Trials of the mass abort (`_mass`): each holds a turn in every room of the tier."""

    @classmethod
    def quick(cls, *, peer: bool = False) -> Options:
        return cls(
            trials=8,
            rooms=(1, 100),
            idle_rooms=(),
            floor_samples=100,
            remote_trials=5,
            startup_deadline=60.0,
            peer=peer,
        )

    @classmethod
    def scale(cls, *, peer: bool = False) -> Options:
        """The scale rows alone: start-up and teardown at 1,000 and 10,000 rooms, the
        agent-wide interrupt under the load of 1,000 busy rooms, and the mass abort of
        1,000 held turns (no remote stops); the bare client's floor beside each."""
        return cls(
            trials=20,
            rooms=(1000,),
            idle_rooms=(1000, 10_000),
            floor_samples=100,
            remote_trials=0,
            peer=peer,
            scenarios=("agent interrupt", "agent interrupt: all busy"),
            scale_floor=True,
            mass_trials=5,
        )

    @classmethod
    def full(cls, *, peer: bool = False) -> Options:
        return cls(
            trials=40,
            rooms=(1, 100, 1000),
            idle_rooms=(10_000,),
            floor_samples=400,
            remote_trials=20,
            peer=peer,
        )


@dataclass(eq=False)
class Bench:
    platform: Platform
    watch: LogWatch
    user_id: str
    options: Options
    progress: Progress
    series: dict[tuple[str, str, int, str], Series] = field(default_factory=dict)
    leaked: dict[tuple[str, str, int], int | None] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the run saw that the numbers alone do not say (a runtime behind its load)."""

    def metric(
        self,
        runtime: str,
        scenario: str,
        rooms: int,
        metric: str,
        floor: str | None = None,
        unit: str = "ms",
    ) -> Series:
        key = (runtime, scenario, rooms, metric)
        if key not in self.series:
            self.series[key] = Series(runtime, scenario, rooms, metric, floor, unit=unit)
        return self.series[key]

    def failures(self, runtime: str) -> int:
        return sum(s.failures for s in self.series.values() if s.runtime == runtime)

    def post(self, room: str, text: str) -> str:
        return self.platform.post_message(room, self.user_id, text)


POLL = 0.02
"""How often `poll` checks (seconds)."""


async def poll(predicate: Callable[[], bool]) -> None:
    """Return once `predicate()` holds, checked every `POLL` seconds.

    For the waits on thousands of log entries (every room synced, every mark of a
    wave): `Platform.wait_until` would wake the driver, which runs in the platform's
    process, once per entry, and slow the platform it measures, for an agent's
    start-up and wave but not for the bare client's (whose end it reads from the
    client's own line). Every figure is a stamp from the platform's log, so how late
    the check comes changes none; the caller sets the deadline."""
    while not predicate():  # noqa: ASYNC110 - a poll on purpose (above)
        await trio.sleep(POLL)


async def timed(deadline: float, wait: Callable[[], Awaitable[T]]) -> T | None:
    """What `wait()` returns (a stamp, an event), or None if it did not come in `deadline`."""
    with trio.move_on_after(deadline):
        return await wait()
    return None


def since(stamp: float | None, start: float | None) -> float | None:
    """`stamp - start`, or None when either is missing."""
    if stamp is None or start is None:
        return None
    return stamp - start


def now() -> float:
    return time.perf_counter()
