"""Control-signal latency of a band-trio agent on the embedded platform.

    .venv/bin/python benchmarks/signal_latency.py --trials 30

The same intervals as benchmarks/RESULTS.md gives for band-sdk 6.0.1: the signal
is stamped just before the platform queues the `agent.control` push; the
adapter stamps its `Cancelled`; REST arrivals are the platform's log stamps
(all `time.perf_counter`). Platform and agent share one process and one trio
run here, so the numbers include both sides' scheduling on one core.
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio

from band_trio import Agent, Turn
from band_trio.platform import Platform, open_platform
from band_trio.testing import RecordingAdapter


async def sleep_then_reply(turn: Turn) -> None:
    await trio.sleep(1.0)
    await turn.reply("done")


def first_after(platform: Platform, since: int, suffix: str, method: str = "POST") -> float | None:
    for entry in platform.log(since):
        if entry.kind == "rest" and entry.method == method and (entry.path or "").endswith(suffix):
            return entry.t
    return None


async def arrival(platform: Platform, since: int, suffix: str, method: str = "POST") -> float:
    await platform.wait_until(lambda: first_after(platform, since, suffix, method) is not None)
    found = first_after(platform, since, suffix, method)
    assert found is not None
    return found


def row(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return (
        f"| {name} | {statistics.median(ms):.2f} | {ms[len(ms) // 10]:.2f} | "
        f"{ms[min(len(ms) - 1, len(ms) * 9 // 10)]:.2f} | {ms[0]:.2f} | {ms[-1]:.2f} |"
    )


async def main(trials: int) -> None:
    rows: dict[str, list[float]] = {}
    async with open_platform(seed=True) as platform, trio.open_nursery() as nursery:
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id and info.user_id
        agent_id, room, user = info.agent_id, info.room_id, info.user_id
        adapter = RecordingAdapter(sleep_then_reply)
        agent = Agent(
            adapter,
            agent_id=agent_id,
            api_key=info.api_key,
            rest_url=info.rest_url,
            ws_url=info.ws_url,
        )
        await nursery.start(agent.run)
        for _ in range(trials):
            message = platform.post_message(room, user, "interrupt me")
            await adapter.wait_for(lambda m=message: m in adapter.entered)
            await trio.sleep(0.25)
            mark = len(platform.log())
            sent = time.perf_counter()
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(
                lambda m=message: platform.delivery(m)[agent_id]["status"] == "processed"
            )
            rows.setdefault("interrupt: send → adapter Cancelled", []).append(
                adapter.cancelled_at[message] - sent
            )
            rows.setdefault("interrupt: send → POST processed arrives", []).append(
                await arrival(platform, mark, f"{message}/processed") - sent
            )
            rows.setdefault("interrupt: send → POST activity false arrives", []).append(
                await arrival(platform, mark, "/activity") - sent
            )
        for _ in range(trials):
            message = platform.post_message(room, user, "stop me")
            await adapter.wait_for(lambda m=message: m in adapter.entered)
            await trio.sleep(0.25)
            stop_mark = len(platform.log())
            sent = time.perf_counter()
            platform.send_control(agent_id, "stop", room_id=room)
            await adapter.wait_for(lambda m=message: m in adapter.cancelled_at)
            rows.setdefault("stop: send → adapter Cancelled", []).append(
                adapter.cancelled_at[message] - sent
            )
            await agent.wait_until(lambda: agent.rooms[room].running is None)
            await arrival(platform, stop_mark, "/activity")  # the stop has settled
            await trio.sleep(0.05)
            mark = len(platform.log())
            sent = time.perf_counter()
            platform.send_control(agent_id, "play", room_id=room)
            await adapter.wait_for(lambda m=message: len(adapter.entered[m]) == 2)
            rows.setdefault("play: send → GET /next arrives", []).append(
                await arrival(platform, mark, "/messages/next", "GET") - sent
            )
            rows.setdefault("play: send → adapter re-entry", []).append(
                adapter.entered[message][1] - sent
            )
            await platform.wait_until(
                lambda m=message: platform.delivery(m)[agent_id]["status"] == "processed"
            )
        await agent.stop()
        nursery.cancel_scope.cancel()
    print(f"{trials} trials per row (ms)\n")
    print("| interval | median | p10 | p90 | min | max |\n|---|---:|---:|---:|---:|---:|")
    for name, samples in rows.items():
        print(row(name, samples))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    trio.run(main, parser.parse_args().trials)
