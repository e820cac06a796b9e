"""What an operator sees of band-trio's work: metrics, traces, structured logs.

One seam: the runtime, the link, the bridge and the runs API call its hooks
(`observe.hooks`, its internal API: a `Work` watch around each turn, forward
and run; the REST, claim, adapter and remote-stop spans; the signal and
reconnect counters) and nothing else of observability. What a user needs is exported here. See
docs/how-to/observe.md and docs/reference/observability.md.

* **Metrics** (`REGISTRY`, rendered by `serve_metrics` as Prometheus text on
  `/metrics`): counters and histograms updated as the work happens, gauges of
  live state sampled from the running parts at each scrape (`track`). Label
  values are declared up front: nothing that grows with rooms or messages.
* **Traces** (OpenTelemetry, the optional `band-trio[otel]` extra): a span per
  turn, forward and run, with children for the claim, the adapter call, each
  remote stop and each REST call, and a `band.signal` event for an abort.
  Off until a provider is given (`use_tracer_provider`, `start_tracing`) or
  installed globally; while off, each hook costs one call and OpenTelemetry is
  not imported.
* **Logs** (`configure_logging`): the text format, or one JSON object a line
  with the room, message id and correlation id where known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy

if TYPE_CHECKING:
    from ._endpoint import MetricsApp as MetricsApp
    from ._endpoint import serve_metrics as serve_metrics

from ._instruments import REGISTRY as REGISTRY
from ._instruments import Sample as Sample
from ._instruments import track as track
from ._instruments import untrack as untrack
from ._logs import JsonFormatter as JsonFormatter
from ._logs import LogFormat as LogFormat
from ._logs import bound as bound
from ._logs import configure_logging as configure_logging
from ._metrics import Counter as Counter
from ._metrics import Gauge as Gauge
from ._metrics import Histogram as Histogram
from ._metrics import Registry as Registry
from ._policy import ObservePolicy as ObservePolicy
from ._setup import EXPORTERS as EXPORTERS
from ._setup import Exporter as Exporter
from ._setup import Tracing as Tracing
from ._setup import check_tracing as check_tracing
from ._setup import start_tracing as start_tracing
from ._setup import trace_to as trace_to
from ._trace import use_tracer_provider as use_tracer_provider

__all__ = [
    "EXPORTERS",
    "REGISTRY",
    "Counter",
    "Exporter",
    "Gauge",
    "Histogram",
    "JsonFormatter",
    "LogFormat",
    "MetricsApp",
    "ObservePolicy",
    "Registry",
    "Sample",
    "Tracing",
    "bound",
    "check_tracing",
    "configure_logging",
    "serve_metrics",
    "start_tracing",
    "trace_to",
    "track",
    "untrack",
    "use_tracer_provider",
]


# the HTTP server is imported when `/metrics` is served, not with the package
__getattr__, __dir__ = lazy(
    __name__, {"MetricsApp": "._endpoint", "serve_metrics": "._endpoint"}, __all__
)
