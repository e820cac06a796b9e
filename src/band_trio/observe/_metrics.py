"""Counters, histograms and gauges, and their Prometheus text (sans-IO: no trio here).

A few hundred lines instead of a dependency: band-trio counts a handful of
things, each with a fixed, declared set of label values, and renders them in
the Prometheus text exposition format (version 0.0.4) when scraped.

* **Low cardinality by construction.** Every label of an instrument declares
  the values it may take (an outcome, a signal's kind); a value not declared is
  counted as `other`. No message id, room id or error text can ever become a
  label, however the runtime is driven.
* **Every series from the start.** Each combination of declared values is a
  series at 0 before anything happens, so `rate()` and `increase()` see the
  first event.
* **Cheap to update.** An update is a dict lookup and an add; nothing is
  rendered until a scrape asks.

Gauges of live state (rooms joined, queue depths) are not kept up to date by
the runtime: each scrape samples them from the parts that are running
(`Registry.sample`), so they can never drift from what they describe.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["OTHER", "Counter", "Gauge", "Histogram", "Registry", "render_number"]

OTHER = "other"
"""The label value an undeclared value is counted as."""

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_RESERVED_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created", "_info")


def render_number(value: float) -> str:
    """A sample value as the text format writes it (`3`, `0.25`, `+Inf`, `NaN`)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class _Family:
    """What every instrument has: a name, a help text, declared labels."""

    kind = ""

    def __init__(
        self, name: str, help: str, labels: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(f"{name!r} is not a metric name")
        labels = dict(labels or {})
        for label, values in labels.items():
            if not _LABEL.match(label) or label.startswith("__") or label == "le":
                raise ValueError(f"{name}: {label!r} is not a label name")
            if not values or len(set(values)) != len(values):
                raise ValueError(f"{name}: label {label!r} needs distinct declared values")
        self.name = name
        self.help = help
        self.label_names: tuple[str, ...] = tuple(labels)
        self._allowed: tuple[frozenset[str], ...] = tuple(
            frozenset(values) for values in labels.values()
        )
        self._declared: tuple[tuple[str, ...], ...] = tuple(
            tuple(values) for values in labels.values()
        )

    def combinations(self) -> Iterable[tuple[str, ...]]:
        """The declared series, each at zero from the start (an `other` one appears
        once something undeclared is counted)."""
        return itertools.product(*self._declared)

    def key(self, values: Sequence[str]) -> tuple[str, ...]:
        """`values` with each undeclared one counted as `other`."""
        if len(values) != len(self.label_names):
            raise TypeError(f"{self.name} takes labels {self.label_names}, got {tuple(values)}")
        return tuple(
            value if value in allowed else OTHER
            for value, allowed in zip(values, self._allowed, strict=True)
        )

    def _labels(self, key: tuple[str, ...], extra: str = "") -> str:
        parts = [
            f'{name}="{_escape_label(value)}"'
            for name, value in zip(self.label_names, key, strict=True)
        ]
        if extra:
            parts.append(extra)
        return "{" + ",".join(parts) + "}" if parts else ""

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Family):
    """A count that only goes up; its name ends in `_total`."""

    kind = "counter"

    def __init__(
        self, name: str, help: str, labels: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        if not name.endswith("_total"):
            raise ValueError(f"a counter's name ends in _total: {name!r}")
        super().__init__(name, help, labels)
        self._values: dict[tuple[str, ...], float] = dict.fromkeys(self.combinations(), 0.0)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter never goes down")
        values = self._values
        if labels in values:
            values[labels] += amount
        else:
            key = self.key(labels)
            values[key] = values.get(key, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(self.key(labels), 0.0)

    def lines(self) -> list[str]:
        return [
            f"{self.name}{self._labels(key)} {render_number(value)}"
            for key, value in self._values.items()
        ]


class Histogram(_Family):
    """Observations counted into cumulative buckets (`le`), with their sum and count."""

    kind = "histogram"

    def __init__(
        self,
        name: str,
        help: str,
        buckets: Sequence[float],
        labels: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(name, help, labels)
        bounds = [float(b) for b in buckets]
        if not bounds or bounds != sorted(set(bounds)) or any(math.isinf(b) for b in bounds):
            raise ValueError(f"{name}: buckets must be finite and increasing")
        self.buckets: tuple[float, ...] = tuple(bounds)
        self._series: dict[tuple[str, ...], _Series] = {
            key: _Series(len(bounds)) for key in self.combinations()
        }

    def observe(self, value: float, *labels: str) -> None:
        series = self._series.get(labels)
        if series is None:
            key = self.key(labels)
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = _Series(len(self.buckets))
        series.add(self.buckets, value)

    def count(self, *labels: str) -> int:
        series = self._series.get(self.key(labels))
        return 0 if series is None else series.count

    def total(self, *labels: str) -> float:
        series = self._series.get(self.key(labels))
        return 0.0 if series is None else series.sum

    def lines(self) -> list[str]:
        out: list[str] = []
        edges = [*(repr(b) for b in self.buckets), "+Inf"]  # `1.0`, as OpenMetrics writes it
        for key, series in self._series.items():
            running = 0
            for edge, count in zip(edges, series.counts, strict=True):
                running += count
                bucket = self._labels(key, f'le="{edge}"')
                out.append(f"{self.name}_bucket{bucket} {running}")
            out.append(f"{self.name}_sum{self._labels(key)} {render_number(series.sum)}")
            out.append(f"{self.name}_count{self._labels(key)} {series.count}")
        return out


class _Series:
    __slots__ = ("count", "counts", "sum")

    def __init__(self, bounds: int) -> None:
        self.counts = [0] * (bounds + 1)  # the last one is +Inf
        self.sum = 0.0
        self.count = 0

    def add(self, buckets: tuple[float, ...], value: float) -> None:
        for index, bound in enumerate(buckets):
            if value <= bound:
                self.counts[index] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += value
        self.count += 1


class Gauge(_Family):
    """A value that goes up and down. Safe to change from a worker thread."""

    kind = "gauge"

    def __init__(
        self, name: str, help: str, labels: Mapping[str, Sequence[str]] | None = None
    ) -> None:
        if name.endswith(_RESERVED_SUFFIXES) and not name.endswith("_info"):
            raise ValueError(f"a gauge's name does not end in a counter's suffix: {name!r}")
        super().__init__(name, help, labels)
        self._values: dict[tuple[str, ...], float] = dict.fromkeys(self.combinations(), 0.0)
        self._lock = threading.Lock()

    def add(self, amount: float, *labels: str) -> None:
        key = self.key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def set(self, value: float, *labels: str) -> None:
        key = self.key(labels)
        with self._lock:
            self._values[key] = value

    def value(self, *labels: str) -> float:
        return self._values.get(self.key(labels), 0.0)

    def reset(self) -> None:
        with self._lock:
            for key in self._values:
                self._values[key] = 0.0

    def lines(self) -> list[str]:
        with self._lock:
            items = list(self._values.items())
        return [f"{self.name}{self._labels(key)} {render_number(value)}" for key, value in items]


Source = Callable[[], None]
"""Adds what one running part holds now to the sampled gauges."""


class Registry:
    """The instruments of a process, in the order they are rendered.

    `sampled` gauges are zeroed and refilled by the sources at every render; the
    other instruments keep their values for the life of the process."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}
        self._sampled: list[Gauge] = []
        self._sources: dict[int, Source] = {}
        self._next = 0

    def register(self, family: _Family, *, sampled: bool = False) -> None:
        if family.name in self._families:
            raise ValueError(f"{family.name} is registered already")
        self._families[family.name] = family
        if sampled:
            if not isinstance(family, Gauge):
                raise TypeError("only a gauge is sampled")
            self._sampled.append(family)

    def families(self) -> list[_Family]:
        return list(self._families.values())

    def add_source(self, source: Source) -> int:
        """Sample `source` at every render until `remove_source(handle)`."""
        self._next += 1
        self._sources[self._next] = source
        return self._next

    def remove_source(self, handle: int) -> None:
        self._sources.pop(handle, None)

    @property
    def sources(self) -> int:
        """How many running parts are sampled now (each owner removes its own)."""
        return len(self._sources)

    def sample(self) -> None:
        for gauge in self._sampled:
            gauge.reset()
        for source in list(self._sources.values()):
            source()

    def render(self) -> bytes:
        """The whole exposition, sampled now."""
        self.sample()
        lines: list[str] = []
        for family in self._families.values():
            lines.extend(family.header())
            lines.extend(family.lines())
        return ("\n".join(lines) + "\n").encode()
