"""Tracing for a command: an OpenTelemetry SDK provider with one exporter.

`start_tracing("console")` writes each span as JSON to stderr (stdout is a
command's own output); `start_tracing("otlp")` sends them to a collector over
OTLP/HTTP, configured the OpenTelemetry way: `OTEL_EXPORTER_OTLP_ENDPOINT`
(default `http://localhost:4318`), `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`.

Spans are exported from the SDK's own thread in batches, from a bounded queue
(`ObservePolicy.trace_queue`): the event loop never waits for a collector,
and one that is down costs at most the queue. At exit the spans still queued
get `ObservePolicy.trace_flush` to leave, then the command exits anyway.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any, Literal

from ..errors import ConfigurationError
from ._policy import ObservePolicy
from ._trace import use_tracer_provider

__all__ = ["EXPORTERS", "Exporter", "Tracing", "check_tracing", "start_tracing", "trace_to"]

Exporter = Literal["console", "otlp"]
EXPORTERS: tuple[Exporter, ...] = ("console", "otlp")
NEEDS_EXTRA = "tracing needs OpenTelemetry: pip install 'band-trio[otel]'"


class Tracing:
    """A provider band-trio traces to until `close()`."""

    def __init__(self, provider: Any, policy: ObservePolicy) -> None:
        self.provider = provider
        self._policy = policy

    def close(self) -> bool:
        """Stop tracing, and give the queued spans `trace_flush` to leave. False if
        they did not make it in time (they are dropped)."""
        use_tracer_provider(None)
        done = threading.Thread(target=self.provider.shutdown, name="band-trio traces", daemon=True)
        done.start()
        done.join(self._policy.trace_flush)
        return not done.is_alive()


def check_tracing(exporter: str) -> None:
    """A `ConfigurationError` unless `start_tracing(exporter)` can work here (the
    exporter is known, and the `band-trio[otel]` extra is installed)."""
    if exporter not in EXPORTERS:
        raise ConfigurationError(f"traces go to one of {', '.join(EXPORTERS)}, not {exporter!r}")
    needed = ["opentelemetry.sdk.trace"]
    if exporter == "otlp":
        needed.append("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    for name in needed:
        try:
            found = importlib.util.find_spec(name)
        except ImportError:  # a parent package is missing
            found = None
        if found is None:
            raise ConfigurationError(NEEDS_EXTRA)


def start_tracing(
    exporter: Exporter, *, service: str, policy: ObservePolicy | None = None
) -> Tracing:
    """Trace band-trio's work to `exporter` (see the module docstring); `service` is
    the default `service.name` (`OTEL_SERVICE_NAME` wins)."""
    policy = policy or ObservePolicy()
    check_tracing(exporter)
    try:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter
    except ImportError:
        raise ConfigurationError(NEEDS_EXTRA) from None
    if exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigurationError(NEEDS_EXTRA) from None
        sink: Any = OTLPSpanExporter(timeout=policy.trace_export_timeout)
    else:
        sink = ConsoleSpanExporter(out=sys.stderr)
    return trace_to(sink, service=service, policy=policy)


def trace_to(sink: Any, *, service: str, policy: ObservePolicy) -> Tracing:
    """Trace band-trio's work to the span exporter `sink`, in batches from a bounded
    queue (`start_tracing` with an exporter of your own)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource.create({"service.name": service}))
    limits = SpanLimits(max_attribute_length=policy.trace_attribute_chars)
    provider = TracerProvider(resource=resource, span_limits=limits, shutdown_on_exit=False)
    provider.add_span_processor(
        BatchSpanProcessor(
            sink,
            max_queue_size=policy.trace_queue,
            max_export_batch_size=policy.trace_batch,
            schedule_delay_millis=policy.trace_delay * 1000,
            export_timeout_millis=policy.trace_export_timeout * 1000,
        )
    )
    use_tracer_provider(provider)
    return Tracing(provider, policy)
