"""Spans, when tracing is on; nothing at all when it is off.

band-trio speaks only OpenTelemetry's API here, and only once someone has
turned tracing on: either band-trio's own switch (`use_tracer_provider`, what
`--traces` sets up), or a real provider installed globally by the application
(`opentelemetry.trace.set_tracer_provider`, or `opentelemetry-instrument`).
Until then `tracer()` is None and every hook returns a shared no-op at the
cost of one call: OpenTelemetry is not even imported (it is an optional
extra, `band-trio[otel]`).

A span is made current for what runs inside it (OpenTelemetry keeps the
current span in a context variable; trio copies a task's context into the
tasks it starts, so work started inside a span is its child). A cancel is not
an error: a span left by one gets `band.cancelled = true` and keeps its status
unset; an exception gets status ERROR with the exception recorded.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

__all__ = [
    "NULL_STEP",
    "Step",
    "now_ns",
    "record_span",
    "rest_route",
    "step",
    "tracer",
    "use_tracer_provider",
]

TRACER_NAME = "band_trio"

Attributes = Mapping[str, str | bool | int | float]


class _State:
    provider: Any = None
    """Set by `use_tracer_provider`: band-trio traces to it, whatever the global one is."""
    tracer: Any = None


_state = _State()


def use_tracer_provider(provider: Any) -> None:
    """Send band-trio's spans to `provider` (an OpenTelemetry `TracerProvider`); None
    goes back to the default: OpenTelemetry's global provider, if a real one is set."""
    _state.provider = provider
    _state.tracer = None if provider is None else provider.get_tracer(TRACER_NAME, _version())


def tracer() -> Any:
    """band-trio's OpenTelemetry tracer, or None while tracing is off."""
    found = _state.tracer
    if found is not None:
        return found
    api = sys.modules.get("opentelemetry.trace")  # nobody imported it: nobody set a provider
    if api is None:
        return None
    provider = api.get_tracer_provider()
    if isinstance(provider, api.ProxyTracerProvider | api.NoOpTracerProvider):
        return None
    _state.tracer = provider.get_tracer(TRACER_NAME, _version())
    return _state.tracer


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("band-trio")
    except Exception:  # not installed as a distribution (a source tree on sys.path)
        return "unknown"


def now_ns() -> int:
    """Wall-clock nanoseconds, as OpenTelemetry stamps spans and events."""
    return time.time_ns()


class Step:
    """A span made current for the block it wraps (`with step(...) as s:`)."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: Any) -> None:
        self._span = span
        self._token: Any = None

    @property
    def span(self) -> Any:
        return self._span

    def set(self, key: str, value: str | bool | int | float | None) -> None:
        if value is not None:
            self._span.set_attribute(key, value)

    def event(self, name: str, attributes: Attributes, timestamp: int | None = None) -> None:
        self._span.add_event(name, dict(attributes), timestamp)

    def fail(self, description: str) -> None:
        """Mark the span failed without an exception (a turn whose adapter raised)."""
        from opentelemetry.trace import Status, StatusCode

        self._span.set_status(Status(StatusCode.ERROR, description))

    def __enter__(self) -> Step:
        from opentelemetry import context, trace

        self._token = context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        from opentelemetry import context

        span = self._span
        try:
            if isinstance(exc, Exception):
                from opentelemetry.trace import Status, StatusCode

                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:200]))
            elif exc is not None:  # a cancel (or the process being interrupted)
                span.set_attribute("band.cancelled", True)
        finally:
            context.detach(self._token)
            span.end()


class _NullStep:
    """What every hook gets while tracing is off: does nothing, costs nothing."""

    __slots__ = ()
    span = None

    def set(self, key: str, value: str | bool | int | float | None) -> None:
        pass

    def event(self, name: str, attributes: Attributes, timestamp: int | None = None) -> None:
        pass

    def fail(self, description: str) -> None:
        pass

    def __enter__(self) -> _NullStep:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


NULL_STEP = _NullStep()


def step(
    name: str, attributes: Attributes | None = None, *, client: bool = False
) -> Step | _NullStep:
    """A child span of the current one named `name` (a CLIENT span if `client`)."""
    found = tracer()
    if found is None:
        return NULL_STEP
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    return Step(found.start_span(name, kind=kind, attributes=attributes, record_exception=False))


def record_span(name: str, start_ns: int, end_ns: int, attributes: Attributes) -> None:
    """A finished span, child of the current one, for something timed already (a
    remote stop, measured by the contract before it is reported)."""
    found = tracer()
    if found is None:
        return
    span = found.start_span(name, attributes=attributes, start_time=start_ns)
    span.end(end_time=end_ns)


def rest_route(path: str) -> str:
    """A REST path with its ids replaced (`chats/{room}/messages/{message}/processing`):
    a span's name must not grow with the rooms (the path itself is an attribute)."""
    parts = path.split("/")
    for index in range(1, len(parts)):
        if parts[index - 1] == "chats":
            parts[index] = "{room}"
        elif parts[index - 1] == "messages" and parts[index] != "next":
            parts[index] = "{message}"
    return "/".join(parts)
