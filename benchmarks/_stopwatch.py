"""What the stop benchmarks share: the start of every interval, and the table.

Every interval starts at the platform's own log stamp of the outgoing
`agent.control` frame (its websocket writer stamps it just before the send):
`time.perf_counter()` in the platform's process, which peers running in other
processes on the same host can be compared with.
"""

from __future__ import annotations

import statistics
from typing import Any

from band_trio.platform import Platform

__all__ = ["control_frame_after", "streaming", "table"]


def control_frame_after(platform: Platform, since: int) -> float | None:
    """The stamp of the first `agent.control` frame sent at log position `since` or later."""
    for entry in platform.log(since):
        if entry.kind == "ws_out" and entry.frame and '"agent.control"' in entry.frame:
            return entry.t
    return None


async def streaming(llm: Any, since: int, chunks: int = 3, wait: float = 30.0) -> int:
    """Wait for a new stubllm answer (after event `since`) to have sent `chunks` chunks
    (none: just begun); its request number. `llm` is a tests/peers stubllm `Peer`."""
    started = await llm.wait_for(timeout=wait, since=since, event="stream_started")
    req = int(started["req"])
    if chunks:
        await llm.wait_for(lambda e: e["count"] >= chunks, timeout=wait, event="chunk", req=req)
    return req


def table(rows: dict[str, list[float]]) -> str:
    """A markdown table of intervals (seconds in, milliseconds out)."""
    lines = ["| interval | n | median ms | min | max |", "|---|---:|---:|---:|---:|"]
    for name, samples in rows.items():
        ms = [s * 1000 for s in samples]
        median = statistics.median(ms)
        lines.append(f"| {name} | {len(ms)} | {median:.2f} | {min(ms):.2f} | {max(ms):.2f} |")
    return "\n".join(lines)
