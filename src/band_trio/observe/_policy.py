"""`ObservePolicy`: every duration and count of the metrics endpoint and the tracing."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from ..policy import ServerPolicy

__all__ = ["ObservePolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservePolicy:
    """How `/metrics` is served and how spans leave the process. Use `replace()`."""

    metrics_grace: float = 1.0
    """A scrape in progress when the command stops gets this long to finish."""
    server: ServerPolicy = field(default_factory=ServerPolicy)
    """The metrics endpoint's bounded sends (`band_trio.server`)."""
    trace_queue: int = 2048
    """Finished spans buffered for export at most; past it new ones are dropped (the
    OpenTelemetry SDK counts them), so a collector that is down costs bounded memory."""
    trace_batch: int = 512
    """Spans sent in one export at most."""
    trace_delay: float = 2.0
    """Buffered spans are exported at least this often."""
    trace_export_timeout: float = 10.0
    """Deadline of one export to the collector (the exporter's own timeout)."""
    trace_attribute_chars: int = 4096
    """A span attribute's text is cut to this many characters (a signal's reason, a
    remote stop's detail: a platform frame may hold megabytes)."""
    trace_flush: float = 5.0
    """At exit, how long the spans still buffered may take to leave; then they are
    dropped and the command exits anyway."""

    def replace(self, **changes: float | int | ServerPolicy) -> ObservePolicy:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        for name in ("metrics_grace", "trace_delay", "trace_export_timeout", "trace_flush"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"ObservePolicy.{name} must be seconds > 0, got {value!r}")
        for name in ("trace_queue", "trace_batch", "trace_attribute_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"ObservePolicy.{name} must be >= 1")
        if self.trace_batch > self.trace_queue:
            raise ValueError("ObservePolicy.trace_batch must not exceed trace_queue")
