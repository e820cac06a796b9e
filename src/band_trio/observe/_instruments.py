"""band-trio's metrics: every name, help text and label value, in one place.

The reference for these is docs/reference/observability.md; a test renders
them through Prometheus' own parser. Label values are the values of the
runtime's enums (a test checks that they agree), so nothing that grows with
the rooms or the messages ever becomes a label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ._metrics import Counter, Gauge, Histogram, Registry

__all__ = [
    "ABORT_KINDS",
    "REGISTRY",
    "Sample",
    "WorkKind",
    "track",
    "untrack",
]

WorkKind = Literal["turn", "forward", "run"]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
"""Seconds, for a cancel and a remote stop: a millisecond is typical, ten seconds is
the stop grace twice over."""
DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
"""Seconds, for a whole turn, forward or run: up to the turn deadline (30 minutes)."""

TURN_OUTCOMES = ("succeeded", "failed", "aborted", "not_claimed", "claim_stopped", "consumed")
FORWARD_OUTCOMES = ("delivered", "failed", "cancelled")
RUN_STATUSES = ("completed", "failed", "cancelled", "interrupted")
ABORT_KINDS = ("interrupt", "stop", "platform_stop", "left", "shutdown")
SIGNAL_MODES = ("interrupt", "stop", "play")
SIGNAL_RESULTS = ("applied", "duplicate", "no_room")
STOP_OUTCOMES = ("confirmed", "requested", "unconfirmed")
RECONNECT_REASONS = (
    "closed",
    "dropped",
    "heartbeat_timeout",
    "superseded",
    "upgrade_refused",
    "connect_failed",
    "setup_failed",
)

REGISTRY = Registry()


def _counter(name: str, help: str, **labels: tuple[str, ...]) -> Counter:
    family = Counter(name, help, labels)
    REGISTRY.register(family)
    return family


def _histogram(
    name: str, help: str, buckets: tuple[float, ...], **labels: tuple[str, ...]
) -> Histogram:
    family = Histogram(name, help, buckets, labels)
    REGISTRY.register(family)
    return family


def _gauge(name: str, help: str, *, sampled: bool = True, **labels: tuple[str, ...]) -> Gauge:
    family = Gauge(name, help, labels)
    REGISTRY.register(family, sampled=sampled)
    return family


TURNS = _counter(
    "band_trio_turns_total",
    "Turns (claim, adapter, settle) by how they ended.",
    outcome=TURN_OUTCOMES,
)
TURN_SECONDS = _histogram(
    "band_trio_turn_duration_seconds",
    "A turn's time from its claim to its settled mark, by outcome.",
    DURATION_BUCKETS,
    outcome=TURN_OUTCOMES,
)
FORWARDS = _counter(
    "band_trio_forwards_total",
    "The bridge's forwards to their targets, by how they ended.",
    outcome=FORWARD_OUTCOMES,
)
FORWARD_SECONDS = _histogram(
    "band_trio_forward_duration_seconds",
    "A forward's time at its target, by outcome.",
    DURATION_BUCKETS,
    outcome=FORWARD_OUTCOMES,
)
RUNS = _counter(
    "band_trio_runs_total",
    "The runs API's runs, by their final status.",
    status=RUN_STATUSES,
)
RUN_SECONDS = _histogram(
    "band_trio_run_duration_seconds",
    "A run's time from its start to its terminal event, by status.",
    DURATION_BUCKETS,
    status=RUN_STATUSES,
)
SIGNAL_CANCEL_SECONDS = _histogram(
    "band_trio_signal_cancel_seconds",
    "From the abort of a turn, forward or run (a signal applied, the room left, the "
    "shutdown) to its cancel scope exiting: the adapter stopped, its remote stops settled.",
    LATENCY_BUCKETS,
    kind=ABORT_KINDS,
)
SIGNALS = _counter(
    "band_trio_signals_total",
    "Control signals received, by mode and what became of them.",
    mode=SIGNAL_MODES,
    result=SIGNAL_RESULTS,
)
REMOTE_STOPS = _counter(
    "band_trio_remote_stops_total",
    "Stops of remote work (an A2A task, an LLM stream, a process group) by outcome.",
    outcome=STOP_OUTCOMES,
)
REMOTE_STOP_SECONDS = _histogram(
    "band_trio_remote_stop_duration_seconds",
    "From a remote stop being sent to its outcome.",
    LATENCY_BUCKETS,
    outcome=STOP_OUTCOMES,
)
CONNECTS = _counter(
    "band_trio_connects_total",
    "Connections to the platform that finished joining their rooms.",
)
RECONNECTS = _counter(
    "band_trio_reconnects_total",
    "Connections that ended and were tried again, by why they ended.",
    reason=RECONNECT_REASONS,
)
THREADS_ABANDONED_TOTAL = _counter(
    "band_trio_threads_abandoned_total",
    "Worker threads a cancelled turn stopped waiting for (`run_in_thread`).",
)
THREADS_ABANDONED = _gauge(
    "band_trio_abandoned_threads_alive",
    "Worker threads abandoned by a cancelled turn that are still running.",
    sampled=False,
)
ASYNCIO_OVERRUNS_TOTAL = _counter(
    "band_trio_asyncio_overruns_total",
    "asyncio tasks (`run_asyncio`) that ignored their turn's cancel past the stop grace.",
)
ASYNCIO_OVERRUNS = _gauge(
    "band_trio_asyncio_overruns_alive",
    "asyncio tasks that ignored their turn's cancel and are still running.",
    sampled=False,
)
CONNECTED = _gauge("band_trio_connected", "Agent identities connected to the platform now.")
ROOMS = _gauge("band_trio_rooms", "Rooms the agent identities serve now.")
ROOMS_JOINED = _gauge(
    "band_trio_rooms_joined", "Rooms whose topics are joined on the open connection now."
)
QUEUE_DEPTH = _gauge(
    "band_trio_queue_depth",
    "Work waiting now: pushed messages waiting for their room's turn, the bridge's "
    "queued forwards, queued runs.",
    queue=("messages", "forwards", "runs"),
)
IN_PROGRESS = _gauge(
    "band_trio_in_progress",
    "Turns, forwards and runs running now.",
    work=("turn", "forward", "run"),
)

_QUEUES = {"turn": "messages", "forward": "forwards", "run": "runs"}


@dataclass(frozen=True, slots=True)
class Sample:
    """What one running part holds now, for the sampled gauges."""

    work: WorkKind
    in_progress: int = 0
    queued: int = 0
    connected: int = 0
    rooms: int = 0
    rooms_joined: int = 0


def _add(sample: Sample) -> None:
    IN_PROGRESS.add(sample.in_progress, sample.work)
    QUEUE_DEPTH.add(sample.queued, _QUEUES[sample.work])
    CONNECTED.add(sample.connected)
    ROOMS.add(sample.rooms)
    ROOMS_JOINED.add(sample.rooms_joined)


def track(source: Callable[[], Sample]) -> int:
    """Sample `source` into the gauges at every scrape, until `untrack(handle)`. The
    owner of the part registers it while the part runs."""
    return REGISTRY.add_source(lambda: _add(source()))


def untrack(handle: int) -> None:
    REGISTRY.remove_source(handle)
