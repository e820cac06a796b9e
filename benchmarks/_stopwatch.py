"""What the stop benchmarks share: the start of every interval, and the table.

Every interval starts at the platform's own log stamp of the outgoing
`agent.control` frame (its websocket writer stamps it just before the send):
`time.perf_counter()` in the platform's process, which peers running in other
processes on the same host can be compared with.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from band_trio import Agent
from band_trio.platform import Platform

__all__ = [
    "StopStamps",
    "control_frame_after",
    "processed",
    "run_cli",
    "slow_trials",
    "streaming",
    "stubllm_signal",
    "table",
]

Measure = Callable[[str, str, int], Awaitable[dict[str, float]]]
"""A trial's signal: (mode, message id, stubllm request) → its intervals in seconds."""


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


def processed(platform: Platform, message: str) -> Callable[[], bool]:
    """Whether the platform's agent has marked `message` processed (for `wait_until`)."""
    agent_id = platform.info.agent_id
    assert agent_id
    return lambda: platform.delivery(message)[agent_id]["status"] == "processed"


async def stubllm_signal(
    platform: Platform, llm: Any, mode: str, room: str, req: int, wait: float = 30.0
) -> tuple[float, dict[str, float]]:
    """Send `mode` to the room while stubllm streams request `req`: the control frame's
    stamp, and stubllm's stamps of the request's disconnect and generator cancel."""
    agent_id = platform.info.agent_id
    assert agent_id
    mark = len(platform.log())
    platform.send_control(agent_id, mode, room_id=room, reason="benchmark")  # type: ignore[arg-type]
    cancelled = await llm.wait_for(timeout=wait, event="stream_cancelled", req=req)
    disconnect = await llm.wait_for(timeout=wait, event="disconnect", req=req)
    await platform.wait_until(lambda: control_frame_after(platform, mark) is not None)
    sent = control_frame_after(platform, mark)
    assert sent is not None
    return sent, {
        "stubllm sees the disconnect": disconnect["perf"] - sent,
        "stubllm generator cancelled": cancelled["perf"] - sent,
    }


class StopStamps:
    """For an adapter subclass: stamps of each remote stop, and a wait for the n-th.

    The subclass appends a dict per stop to `stamps` and calls `settled(answer)` when
    the stop returns; `stop_settled(n)` waits for it. Indexes count every stop, the
    replayed turns' too, so a trial reads the one its own signal caused.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamps: list[dict[str, Any]] = []
        self._settled = trio.Event()

    def settled(self, answer: Any) -> None:
        self.stamps[-1].update(settled=time.perf_counter(), answer=answer)
        self._settled.set()
        self._settled = trio.Event()

    async def stop_settled(self, index: int) -> dict[str, Any]:
        """The stamps of the `index`-th stop, once it returned confirmed."""
        while len(self.stamps) <= index or "settled" not in self.stamps[index]:
            await self._settled.wait()
        stamp = self.stamps[index]
        outcome = stamp["answer"][0] if isinstance(stamp["answer"], tuple) else stamp["answer"]
        assert outcome.value == "confirmed", stamp
        return stamp


async def slow_trials(
    platform: Platform,
    llm: Any,
    agent: Agent,
    room: str,
    trials: int,
    measure: Measure,
    rows: dict[str, list[float]],
) -> None:
    """The interrupt and stop trials of a `[slow]` stubllm answer in `room`.

    Each interrupt trial waits for 3 chunks of a fresh answer, signals, and waits for the
    message to be processed. Each stop trial signals a stop likewise, waits for the room
    to be idle, plays it and interrupts the replayed answer (measured, not recorded), so
    every trial starts from an idle room. The intervals go into `rows` as
    `"{mode}: control frame → {name}"`.
    """
    agent_id, user = platform.info.agent_id, platform.info.user_id
    assert agent_id and user

    def add(mode: str, intervals: dict[str, float]) -> None:
        for name, seconds in intervals.items():
            rows.setdefault(f"{mode}: control frame → {name}", []).append(seconds)

    for trial in range(trials):
        since = llm.mark()
        message = platform.post_message(room, user, f"[slow] interrupt {trial}")
        req = await streaming(llm, since)
        add("interrupt", await measure("interrupt", message, req))
        await platform.wait_until(processed(platform, message))
    for trial in range(trials):
        since = llm.mark()
        message = platform.post_message(room, user, f"[slow] stop {trial}")
        req = await streaming(llm, since)
        add("stop", await measure("stop", message, req))
        await agent.wait_until(lambda: agent.rooms[room].running is None)
        since = llm.mark()
        platform.send_control(agent_id, "play", room_id=room)
        req = await streaming(llm, since, chunks=1)  # the stopped message, replayed
        await measure("interrupt", message, req)
        await platform.wait_until(processed(platform, message))


def run_cli(
    main: Callable[[int], Awaitable[dict[str, list[float]]]],
    header: str,
    doc: str,
    trials: int = 20,
    render: Callable[[dict[str, list[float]]], str] = table,
) -> None:
    """The command line of a stop benchmark: `--trials N [--json]`; runs `main(trials)`
    and prints `header` (with `{trials}` filled in), the table, and the raw seconds."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--trials", type=int, default=trials)
    parser.add_argument("--json", action="store_true", help="also print the raw seconds as JSON")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    results = trio.run(main, args.trials)
    print(header.format(trials=args.trials) + "\n")
    print(render(results))
    if args.json:
        print(json.dumps(results, indent=1, ensure_ascii=False))
