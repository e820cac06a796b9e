"""The observability flags of `agent`, `bridge`, `host` and `runs-api`.

    --metrics HOST:PORT        serve Prometheus' /metrics there (loopback unless
                               --metrics-allow-remote; port 0 picks one, and the
                               command says which on stderr)
    --traces console|otlp      trace turns, forwards and runs (env BAND_TRACES;
                               the `band-trio[otel]` extra)

Both are checked before anything starts (a bad value, or `--traces` without
the extra, exits 2 in one line). The metrics endpoint serves beside the
command for its whole life, its graceful stop included; the spans still
queued at exit get `ObservePolicy.trace_flush` to leave.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import trio

from .. import errors, observe
from ..server import check_bind, parse_listen

__all__ = ["Observing", "add_flags", "observing"]

T = TypeVar("T")


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics (env BAND_METRICS; "
        "loopback unless --metrics-allow-remote; port 0 picks one)",
    )
    parser.add_argument(
        "--metrics-allow-remote",
        action="store_true",
        help="let --metrics listen on a non-loopback address (anyone who reaches it reads it)",
    )
    parser.add_argument(
        "--traces",
        help="trace every turn, forward and run to `console` (JSON on stderr) or `otlp` "
        "(a collector: OTEL_EXPORTER_OTLP_ENDPOINT); env BAND_TRACES; needs band-trio[otel]",
    )


@dataclass(frozen=True, slots=True)
class Observing:
    """What the flags asked for, checked (`observing`)."""

    command: str
    metrics: tuple[str, int] | None = None
    allow_remote: bool = False
    traces: observe.Exporter | None = None
    policy: observe.ObservePolicy = field(default_factory=observe.ObservePolicy)

    def wrap(self, fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        """`fn`, run traced and with the metrics endpoint beside it, as asked."""
        if self.metrics is None and self.traces is None:
            return fn
        return partial(self._observed, fn)

    async def _observed(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        tracing = None
        if self.traces is not None:
            service = f"band-trio-{self.command}"
            tracing = observe.start_tracing(self.traces, service=service, policy=self.policy)
        try:
            if self.metrics is None:
                return await fn(*args)
            return await self._with_metrics(self.metrics, fn, *args)
        finally:
            # at exit, so the loop blocking here holds nothing up: bounded by trace_flush
            if tracing is not None and not tracing.close():
                print(
                    f"band-trio {self.command}: the spans still queued after "
                    f"{self.policy.trace_flush:g}s were dropped",
                    file=sys.stderr,
                )

    async def _with_metrics(
        self, where: tuple[str, int], fn: Callable[..., Awaitable[T]], *args: Any
    ) -> T:
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            serving = partial(
                observe.serve_metrics,
                *where,
                allow_remote=self.allow_remote,
                policy=self.policy,
                stop=stop,
            )
            listening = await nursery.start(serving)
            print(
                f"band-trio {self.command}: metrics on {listening.url}/metrics",
                file=sys.stderr,
                flush=True,
            )
            try:
                return await fn(*args)
            finally:
                stop.set()


def observing(args: argparse.Namespace, command: str) -> Observing:
    """The flags of `command`, checked now: a bad one is a `ConfigurationError` before
    anything starts."""
    metrics = args.metrics or os.environ.get("BAND_METRICS") or None
    where = None
    if metrics is not None:
        where = parse_listen(metrics, "--metrics (BAND_METRICS)")
        what, opt_in = "the metrics endpoint", "--metrics-allow-remote"
        check_bind(where[0], what=what, allow_remote=args.metrics_allow_remote, opt_in=opt_in)
    traces = args.traces or os.environ.get("BAND_TRACES") or None
    if traces is not None and traces not in observe.EXPORTERS:
        choices = " or ".join(observe.EXPORTERS)
        raise errors.ConfigurationError(f"--traces (BAND_TRACES) is {choices}, not {traces!r}")
    if traces is not None:
        observe.check_tracing(traces)
    allow = bool(args.metrics_allow_remote)
    return Observing(command, metrics=where, allow_remote=allow, traces=traces)
