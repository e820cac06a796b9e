"""What the observability hooks of one turn cost, tracing off and on (docs/benchmarks.md
§ Tracing): a figure below the bench's noise, measured directly.

    .venv/bin/python benchmarks/observe_overhead.py [--turns 20000]

One turn calls: its `Work` watch (log context, counters, the duration histogram,
an abort's latency), the claim's step, the adapter's step, `scope_exited`, and
four REST calls' steps (claim, activity true, the mark, activity false); a
signal adds `bound` and `signal_counted`. This script runs exactly those calls
in a loop inside trio, as the runtime makes them, with:

* off: no provider (the default);
* on: an OpenTelemetry SDK provider with a batch processor whose exporter drops
  the spans (what the spans cost in-process; the export runs in the SDK's thread).

Each figure is the median of 7 rounds, in microseconds per turn.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

import trio

from band_trio import observe
from band_trio.contract import TurnControl
from band_trio.observe import hooks as hooks


class _Dropped:
    """A span exporter that drops everything (the cost of export is off this path)."""

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def one_turn(control: TurnControl, aborted: bool) -> None:
    with hooks.Work("turn", control, room_id="room-1", message_id="message-1",
                      attributes={"band.sender.type": "User"}) as watch:  # fmt: skip
        with hooks.step("band_trio.claim") as claim:
            with hooks.rest_call("POST", "chats/room-1/messages/message-1/processing"):
                pass
            claim.set("band.claim.outcome", "claimed")
        with hooks.rest_call("POST", "chats/room-1/activity"):
            pass
        if aborted:
            with hooks.bound(correlation="ctl-1"):
                hooks.signal_counted("interrupt", "applied")
        with hooks.adapter_call("agent-1", watch):
            pass
        hooks.scope_exited()
        with hooks.rest_call("POST", "chats/room-1/messages/message-1/processed"):
            pass
        with hooks.rest_call("POST", "chats/room-1/activity"):
            pass
        watch.outcome = "aborted" if aborted else "succeeded"


async def rounds(turns: int, aborted: bool) -> float:
    samples = []
    for _ in range(7):
        controls = [TurnControl("room-1", "message-1", stop_grace=1.0) for _ in range(turns)]
        if aborted:
            for control in controls:
                control.aborted("interrupt", "enough")
        started = time.perf_counter_ns()
        for control in controls:
            one_turn(control, aborted)
        samples.append((time.perf_counter_ns() - started) / turns / 1000)
        await trio.lowlevel.checkpoint()
    return statistics.median(samples)


async def main(turns: int) -> None:
    off = await rounds(turns, False), await rounds(turns, True)
    policy = observe.ObservePolicy(trace_queue=10**6)  # no span dropped for want of room
    tracing = observe.trace_to(_Dropped(), service="overhead", policy=policy)
    try:
        on = await rounds(turns, False), await rounds(turns, True)
    finally:
        tracing.close()
    print("| tracing | a turn | an interrupted turn |")
    print("|---|---:|---:|")
    print(f"| off | {off[0]:.2f} µs | {off[1]:.2f} µs |")
    print(f"| on (spans dropped at export) | {on[0]:.1f} µs | {on[1]:.1f} µs |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20000)
    trio.run(main, parser.parse_args().turns)
