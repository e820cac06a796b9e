"""A stopped turn's trace, printed as a tree and drawn on a time line (the picture in
docs/how-to/observe.md).

    .venv/bin/python benchmarks/stop_trace.py [--png docs/images/observe/stop-trace.png]

One trio run: the embedded platform, an `Agent` running the command adapter
(`sleep 30`, in its own process group: remote work a stop must stop), and
OpenTelemetry's SDK with an in-memory exporter. A message is posted; once the
command runs, the platform sends `stop` (what the console's Stop button does);
the turn's spans are read back, printed as a tree, and drawn. Needs the `otel`
and `bench` extras (matplotlib).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from band_trio import Agent, observe
from band_trio.adapters import CommandAdapter
from band_trio.platform import Platform, open_platform

HOLD = 0.3
"""Seconds the command runs before the stop."""


async def capture() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observe.use_tracer_provider(provider)
    try:
        async with open_platform() as platform:
            await _stop_one(platform)
    finally:
        observe.use_tracer_provider(None)
    return list(exporter.get_finished_spans())


async def _stop_one(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.api_key and info.room_id and info.user_id
    agent = Agent(
        CommandAdapter(["sleep", "30"]),
        agent_id=info.agent_id,
        api_key=info.api_key,
        rest_url=info.rest_url,
        ws_url=info.ws_url,
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(agent.run)
            room = info.room_id
            platform.post_message(room, info.user_id, "stop me")
            await agent.wait_until(lambda: agent.rooms[room].running is not None)
            await trio.sleep(HOLD)  # the command runs for a while: a stop mid-work
            platform.send_control(info.agent_id, "stop", room_id=room, reason="wrong room")
            await agent.wait_until(lambda: agent.remote_stops.sent == 1)
            await agent.wait_until(lambda: agent.rooms[room].running is None)
            await agent.stop()


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    ident = parent.context.span_id if parent.context else None
    found = [s for s in spans if s.parent is not None and s.parent.span_id == ident]
    return sorted(found, key=lambda s: s.start_time or 0)


def _ms(span: ReadableSpan) -> float:
    return ((span.end_time or 0) - (span.start_time or 0)) / 1e6


def _label(span: ReadableSpan) -> str:
    attributes = dict(span.attributes or {})
    keep = [
        f"{key.rsplit('.', 1)[-1]}={value}"
        for key, value in attributes.items()
        if key.endswith((".outcome", "cancelled", "status_code", ".name"))
        and not key.startswith("gen_ai")
    ]
    return f"{span.name}  {_ms(span):.1f} ms  {' '.join(keep)}"


def tree(spans: list[ReadableSpan]) -> tuple[ReadableSpan, list[tuple[int, ReadableSpan]]]:
    (turn,) = [s for s in spans if s.name == "band_trio.turn"]
    rows: list[tuple[int, ReadableSpan]] = []

    def walk(span: ReadableSpan, depth: int) -> None:
        rows.append((depth, span))
        for child in _children(spans, span):
            walk(child, depth + 1)

    walk(turn, 0)
    return turn, rows


def show(turn: ReadableSpan, rows: list[tuple[int, ReadableSpan]]) -> None:
    for depth, span in rows:
        print("    " * depth + _label(span))
        for event in span.events:
            if event.name == "band.signal":
                at = (event.timestamp - (turn.start_time or 0)) / 1e6
                attributes = dict(event.attributes or {})
                print("    " * depth + f"  event band.signal at {at:.1f} ms: {attributes}")


def draw(turn: ReadableSpan, rows: list[tuple[int, ReadableSpan]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = turn.start_time or 0
    figure, axes = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.2))
    total = _ms(turn)
    for index, (depth, span) in enumerate(rows):
        left = ((span.start_time or 0) - start) / 1e6
        width = max(_ms(span), total / 400)  # a 1 ms call stays visible
        colour = "#c0392b" if (span.attributes or {}).get("band.cancelled") else "#2e86c1"
        if span.name == "band_trio.remote_stop":
            colour = "#27ae60"
        axes.barh(index, width, left=left, height=0.6, color=colour)
        axes.text(left + width + total / 200, index, "  " * depth + _label(span),
                  va="center", fontsize=8)  # fmt: skip
        for event in span.events:
            if event.name == "band.signal":
                at = (event.timestamp - start) / 1e6
                axes.axvline(at, color="#8e44ad", linestyle="--", linewidth=1)
                kind = (event.attributes or {}).get("band.signal.kind")
                latency = float((event.attributes or {}).get("band.signal.latency_seconds", 0))
                axes.text(at, -0.9, f"band.signal: {kind}, cancelled after {latency * 1e3:.1f} ms",
                          color="#8e44ad", fontsize=8)  # fmt: skip
    axes.set_yticks([])
    axes.invert_yaxis()
    axes.set_ylim(len(rows) - 0.4, -1.4)
    axes.set_xlim(0, total * 1.9)
    axes.set_xlabel("ms since the turn began")
    axes.set_title("A stopped turn: band_trio.turn and its children (red: cancelled)")
    figure.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--png", type=Path, help="draw the trace into this file")
    args = parser.parse_args()
    spans = trio.run(capture)
    turn, rows = tree(spans)
    show(turn, rows)
    if args.png is not None:
        draw(turn, rows, args.png)


if __name__ == "__main__":
    main()
