"""Samples, the rows they summarise, and each runtime's own part.

A `Series` collects one metric's samples (seconds) and failures for one
runtime in one scenario; `Row` is its summary in milliseconds, with the floor
that applies to the metric (measured in the same run, `_floors`) and the
runtime's own part, `p50 - floor_p50`. A failure is a trial in which the
observation never came within its deadline, or came wrong (a mark on a
stopped message); it is counted, never folded into the percentiles.

A few scale rows are not times (`unit`): the agent's resident memory per room
in KiB. Their samples are in that unit and their "ms" columns carry it as it is.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Row", "Series", "percentile"]


def percentile(sorted_ms: list[float], q: float) -> float:
    """The `q`-quantile (0..1) by linear interpolation; NaN for no samples."""
    if not sorted_ms:
        return math.nan
    position = (len(sorted_ms) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(sorted_ms) - 1)
    return sorted_ms[low] + (sorted_ms[high] - sorted_ms[low]) * (position - low)


@dataclass
class Series:
    runtime: str
    scenario: str
    rooms: int
    metric: str
    floor: str | None = None
    """The name of the floor (`_floors.Floors`) this metric is judged against."""
    samples: list[float] = field(default_factory=list)
    failures: int = 0
    notes: list[str] = field(default_factory=list)
    unit: str = "ms"
    """"ms": samples in seconds, shown in ms; any other unit: samples shown as they are."""

    def add(self, seconds: float | None, note: str = "") -> None:
        if seconds is None:
            self.failures += 1
            if note and len(self.notes) < 5:
                self.notes.append(note)
        else:
            self.samples.append(seconds)


@dataclass(frozen=True)
class Row:
    runtime: str
    scenario: str
    rooms: int
    metric: str
    n: int
    failures: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    floor: str | None
    floor_p50_ms: float | None
    own_p50_ms: float | None
    leaked_tasks: int | None
    samples_ms: tuple[float, ...]
    notes: tuple[str, ...] = ()
    unit: str = "ms"

    @classmethod
    def of(cls, series: Series, floors: dict[str, float], leaked: int | None) -> Row:
        scale = 1000 if series.unit == "ms" else 1
        ms = sorted(s * scale for s in series.samples)
        floor_ms = floors.get(series.floor) if series.floor else None
        p50 = percentile(ms, 0.5)
        own = p50 - floor_ms if floor_ms is not None and ms else None
        return cls(
            runtime=series.runtime,
            scenario=series.scenario,
            rooms=series.rooms,
            metric=series.metric,
            n=len(ms),
            failures=series.failures,
            p50_ms=p50,
            p90_ms=percentile(ms, 0.9),
            p99_ms=percentile(ms, 0.99),
            max_ms=ms[-1] if ms else math.nan,
            floor=series.floor,
            floor_p50_ms=floor_ms,
            own_p50_ms=own,
            leaked_tasks=leaked,
            samples_ms=tuple(ms),
            notes=tuple(series.notes),
            unit=series.unit,
        )

    def as_json(self, *, samples: bool = True) -> dict[str, Any]:
        data = asdict(self)
        data["samples_ms"] = list(self.samples_ms) if samples else []
        data["notes"] = list(self.notes)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in data.items()}
