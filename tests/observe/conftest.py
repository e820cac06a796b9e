"""The in-memory span exporter the tracing tests read (OpenTelemetry's SDK)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from band_trio import observe


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observe.use_tracer_provider(provider)
    try:
        yield exporter
    finally:
        observe.use_tracer_provider(None)
        provider.shutdown()
