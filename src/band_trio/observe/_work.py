"""The hooks the runtime, the bridge and the runs API call: one seam for everything
observed about a unit of work.

A unit of work — a turn, a bridge forward, a run — is watched by `Work`, a
context manager its owner wraps around it:

* on the way in: its room and message bound for the log (`_logs.bind`), a span
  started and made current (when tracing is on), a line at INFO for a turn;
* on the way out: its outcome counted and its duration observed; if it was
  aborted, the abort → cancel latency (until `scope_exited()`, or the end)
  observed by kind, and put on the span as a `band.signal` event stamped at the
  abort, with its kind, reason and correlation id; the span ended; one line at
  INFO.

The abort itself is read from the unit's `TurnControl` (its `aborted_at`,
`abort_kind`, `abort_reason`, `abort_correlation`), which the runtime fills in
before it cancels anything: the watch adds nothing to the signal's path.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol, TypeVar

import trio

from . import _instruments as m
from ._logs import bind, unbind
from ._trace import NULL_STEP, Attributes, Step, now_ns, record_span, rest_route, step, tracer

__all__ = [
    "Aborts",
    "ThreadWatch",
    "Work",
    "adapter_call",
    "connected",
    "reconnecting",
    "remote_stop",
    "rest_call",
    "scope_exited",
    "signal_counted",
]

T = TypeVar("T")

_current: contextvars.ContextVar[Work | None] = contextvars.ContextVar("band_work", default=None)


class Aborts(Protocol):
    """What a watch reads of its unit's abort (a `contract.TurnControl`)."""

    aborted_at: float | None
    abort_kind: str | None
    abort_reason: str | None
    abort_correlation: str | None


_COUNTS = {
    "turn": (m.TURNS, m.TURN_SECONDS),
    "forward": (m.FORWARDS, m.FORWARD_SECONDS),
    "run": (m.RUNS, m.RUN_SECONDS),
}
_UNFINISHED = {"turn": "aborted", "forward": "cancelled", "run": "cancelled"}
"""A unit left by a cancel from outside before saying how it ended."""


class Work:
    """Watches one turn, forward or run (see the module docstring).

    The owner sets `outcome` (and `failure`, for a failed one) before the block
    ends; `log`, if given, gets the INFO lines."""

    __slots__ = (
        "_attributes",
        "_control",
        "_exited",
        "_kind",
        "_log",
        "_message",
        "_room",
        "_start",
        "_step",
        "_token",
        "_tokens",
        "failure",
        "outcome",
    )

    def __init__(
        self,
        kind: m.WorkKind,
        control: Aborts,
        *,
        room_id: str,
        message_id: str,
        attributes: Attributes | None = None,
        log: logging.Logger | None = None,
    ) -> None:
        self._kind = kind
        self._control = control
        self._room = room_id
        self._message = message_id
        self._log = log
        self._exited: float | None = None
        self._start = 0.0
        self.outcome: str | None = None
        self.failure: str | None = None
        self._attributes = attributes
        self._step: Step | Any = NULL_STEP
        self._tokens: tuple[contextvars.Token[str | None], ...] = ()
        self._token: contextvars.Token[Work | None] | None = None

    def __enter__(self) -> Work:
        self._start = time.perf_counter()
        self._tokens = bind(self._room, self._message)
        if tracer() is not None:  # the attributes are built only for a span
            kind = self._kind
            attributes: dict[str, str | bool | int | float] = {
                "band.room.id": self._room,
                f"band.{kind}.id": self._message,
            }
            attributes.update(self._attributes or {})
            self._step = step(f"band_trio.{kind}", attributes)
        self._step.__enter__()
        self._token = _current.set(self)
        log = self._log
        if self._kind == "turn" and log is not None and log.isEnabledFor(logging.INFO):
            log.info("room %s: turn for %s started", self._room, self._message)
        return self

    def scope_exited(self) -> None:
        """The unit's cancel scope has exited: an abort's latency ends here."""
        if self._exited is None:
            self._exited = trio.current_time()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        took = time.perf_counter() - self._start
        kind = self._kind
        outcome = self.outcome or (_UNFINISHED[kind] if exc is not None else "failed")
        try:
            counter, seconds = _COUNTS[kind]
            counter.inc(outcome)
            seconds.observe(took, outcome)
            self._abort_seen()
            self._step.set(f"band.{kind}.outcome", outcome)
            if self.failure is not None and exc is None:
                self._step.fail(self.failure)
        finally:
            if self._token is not None:
                _current.reset(self._token)
            self._step.__exit__(exc_type, exc, tb)
            unbind(self._tokens)
        log = self._log
        if log is not None and log.isEnabledFor(logging.INFO):
            what = "turn for" if kind == "turn" else f"{kind} of"
            room, message = self._room, self._message
            correlation = self._control.abort_correlation  # the signal's, if one aborted it
            extra = {"room": room, "message_id": message, "correlation_id": correlation}
            line = "room %s: %s %s ended: %s in %.3fs"
            log.info(line, room, what, message, outcome, took, extra=extra)

    def _abort_seen(self) -> None:
        control = self._control
        aborted_at = control.aborted_at
        if aborted_at is None:
            return
        now = trio.current_time()
        latency = max(0.0, (self._exited if self._exited is not None else now) - aborted_at)
        kind = control.abort_kind or "stop"
        m.SIGNAL_CANCEL_SECONDS.observe(latency, kind)
        if self._step is NULL_STEP:
            return
        attributes: dict[str, str | float] = {
            "band.signal.kind": kind,
            "band.signal.latency_seconds": latency,
        }
        if control.abort_reason:
            attributes["band.signal.reason"] = control.abort_reason
        if control.abort_correlation:
            attributes["band.signal.correlation_id"] = control.abort_correlation
        at = now_ns() - int((now - aborted_at) * 1e9)
        self._step.event("band.signal", attributes, at)


def scope_exited() -> None:
    """The current unit's cancel scope has exited (see `Work.scope_exited`)."""
    work = _current.get()
    if work is not None:
        work.scope_exited()


def adapter_call(agent_id: str, adapter: object) -> Step | Any:
    """The span of one `Adapter.on_turn` call (OpenTelemetry's GenAI `invoke_agent`)."""
    return step(
        "band_trio.adapter",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": agent_id,
            "band.adapter": type(adapter).__qualname__,
        },
    )


def remote_stop(
    *,
    name: str,
    handle: str,
    outcome: str,
    detail: str,
    waited: float,
    took: float,
) -> None:
    """A remote stop ended: count it, and (tracing on) record its span, ending now."""
    m.REMOTE_STOPS.inc(outcome)
    m.REMOTE_STOP_SECONDS.observe(took, outcome)
    end = now_ns()
    attributes: dict[str, str | float] = {
        "band.remote_stop.name": name,
        "band.remote_stop.handle": handle,
        "band.remote_stop.outcome": outcome,
        "band.remote_stop.waited_seconds": waited,
        "band.remote_stop.took_seconds": took,
    }
    if detail:
        attributes["band.remote_stop.detail"] = detail
    record_span("band_trio.remote_stop", end - int(took * 1e9), end, attributes)


def signal_counted(mode: str, result: str) -> None:
    m.SIGNALS.inc(mode, result)


def connected() -> None:
    m.CONNECTS.inc()


def reconnecting(reason: str) -> None:
    m.RECONNECTS.inc(reason)


class ThreadWatch:
    """Whether a worker thread was abandoned, and whether it is still running: the
    `band_trio_threads_abandoned` gauge counts the ones that are."""

    __slots__ = ("_abandoned", "_lock", "_returned")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = False
        self._returned = False

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        """`fn`, telling the watch when it returns (in its thread)."""

        def call(*args: Any) -> T:
            try:
                return fn(*args)
            finally:
                with self._lock:
                    self._returned = True
                    if self._abandoned:
                        m.THREADS_ABANDONED.add(-1)

        return call

    def abandoned(self) -> None:
        """The turn stopped waiting for the thread (it was cancelled)."""
        with self._lock:
            if self._abandoned or self._returned:
                return
            self._abandoned = True
            m.THREADS_ABANDONED.add(1)
        m.THREADS_ABANDONED_TOTAL.inc()


def asyncio_overran() -> None:
    """An asyncio task ignored its turn's cancel past the stop grace (it runs on)."""
    m.ASYNCIO_OVERRUNS_TOTAL.inc()
    m.ASYNCIO_OVERRUNS.add(1)


def asyncio_overrun_ended() -> None:
    """An asyncio task that overran its cancel ended (or its loop closed)."""
    m.ASYNCIO_OVERRUNS.add(-1)


class _RestStep(Step):
    """A REST call's span: an error status is recorded from the error raised."""

    __slots__ = ()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        status = getattr(exc, "status", None)
        if isinstance(status, int):
            self.set("http.response.status_code", status)
        super().__exit__(exc_type, exc, tb)


def rest_call(method: str, path: str) -> Step | Any:
    """The CLIENT span of one call to the platform's REST API (retries included)."""
    found = tracer()
    if found is None:
        return NULL_STEP
    from opentelemetry.trace import SpanKind

    attributes = {"http.request.method": method, "url.path": path}
    name = f"{method} {rest_route(path)}"
    return _RestStep(found.start_span(name, kind=SpanKind.CLIENT, attributes=attributes))
