"""What starting and stopping an agent costs, on the embedded platform.

    .venv/bin/python benchmarks/lifecycle.py --rooms 100 --trials 10

Per trial, one agent (`time.perf_counter` stamps, platform and agent in one
process and one trio run):

* start-up with N idle rooms: `run()` called → `task_status.started()`
  (connected, every room joined);
* a graceful stop with N idle rooms: `stop()` called → `stop()` returned, and
  → `run()` returned (rooms left their topics, the socket closed with a frame);
* a graceful stop with N rooms whose turns finish 50 ms after the stop (the
  marks must land before the agent exits);
* a stop in each start-up phase, `stop()` called → `run()` returned: while
  `GET /me` is held, while the upgrade is refused and retried, while the room
  list is held, while one room's join is refused and retried.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from collections.abc import Awaitable, Callable

import trio

from band_trio import Agent, Policy, Turn
from band_trio.platform import Platform, open_platform
from band_trio.testing import RecordingAdapter


def row(name: str, samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    return (
        f"| {name} | {len(ms)} | {statistics.median(ms):.1f} | {ms[0]:.1f} | "
        f"{ms[min(len(ms) - 1, len(ms) * 9 // 10)]:.1f} | {ms[-1]:.1f} |"
    )


def agent_for(platform: Platform, adapter: RecordingAdapter, policy: Policy) -> Agent:
    info = platform.info
    assert info.agent_id and info.api_key
    return Agent(
        adapter,
        agent_id=info.agent_id,
        api_key=info.api_key,
        rest_url=info.rest_url,
        ws_url=info.ws_url,
        policy=policy,
    )


class Timed:
    """A run of `agent` in the background with the stamps of its start and end."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.started = trio.Event()
        self.ended = trio.Event()

    async def run(self) -> None:
        class Status:
            def started(_, value: object = None) -> None:
                self.started_at = time.perf_counter()
                self.started.set()

        try:
            await self.agent.run(task_status=Status())  # type: ignore[arg-type]
        finally:
            self.ended_at = time.perf_counter()
            self.ended.set()


async def idle_rooms(platform: Platform, rooms: int, policy: Policy) -> tuple[float, float, float]:
    adapter = RecordingAdapter()
    timed = Timed(agent_for(platform, adapter, policy))
    async with trio.open_nursery() as nursery:
        began = time.perf_counter()
        nursery.start_soon(timed.run)
        await timed.started.wait()
        assert timed.started_at is not None
        assert len(timed.agent.rooms) == rooms
        asked = time.perf_counter()
        result = await timed.agent.stop()
        returned = time.perf_counter()
        await timed.ended.wait()
    assert result.graceful and timed.ended_at is not None
    return timed.started_at - began, returned - asked, timed.ended_at - asked


async def busy_rooms(platform: Platform, room_ids: list[str], policy: Policy) -> float:
    info = platform.info
    assert info.user_id
    release = trio.Event()

    async def finish_after_the_stop(turn: Turn) -> None:
        await release.wait()
        await trio.sleep(0.05)
        await turn.reply("done")

    adapter = RecordingAdapter(finish_after_the_stop)
    timed = Timed(agent_for(platform, adapter, policy))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timed.run)
        await timed.started.wait()
        posted = [platform.post_message(r, info.user_id, "busy") for r in room_ids]
        await adapter.wait_for(lambda: len(adapter.calls) == len(room_ids))
        asked = time.perf_counter()
        release.set()
        result = await timed.agent.stop()
        await timed.ended.wait()
    assert result.graceful and timed.ended_at is not None
    agent_id = info.agent_id or ""
    assert all(platform.delivery(m)[agent_id]["status"] == "processed" for m in posted)
    return timed.ended_at - asked


async def stop_in_phase(
    platform: Platform, policy: Policy, arm: Callable[[], Awaitable[Callable[[], None]]]
) -> float:
    timed = Timed(agent_for(platform, RecordingAdapter(), policy))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(timed.run)
        disarm = await arm()
        asked = time.perf_counter()
        await timed.agent.stop()
        await timed.ended.wait()
        disarm()
    assert timed.ended_at is not None and timed.agent.connects == 0  # never fully up
    return timed.ended_at - asked


def phases(platform: Platform) -> dict[str, Callable[[], Awaitable[Callable[[], None]]]]:
    faults = platform.faults
    room_id = platform.info.room_id or ""

    async def key() -> Callable[[], None]:
        hold = faults.hold_rest("me")
        await hold.arrived.wait()
        return hold.release

    async def upgrade_refused() -> Callable[[], None]:
        mark = platform.stats["upgrades_refused"]
        faults.refuse_upgrades(1000, 503)
        await platform.wait_until(lambda: platform.stats["upgrades_refused"] > mark)
        return faults.clear

    async def room_list() -> Callable[[], None]:
        hold = faults.hold_rest("chats")
        await hold.arrived.wait()
        return hold.release

    async def room_join() -> Callable[[], None]:
        mark = platform.stats["faults_joins_refused"]
        faults.refuse_joins(f"chat_room:{room_id}")
        await platform.wait_until(lambda: platform.stats["faults_joins_refused"] > mark)
        return faults.clear

    return {
        "GET /me held": key,
        "upgrade refused, retrying": upgrade_refused,
        "GET /chats held": room_list,
        "a room's join refused, retrying": room_join,
    }


async def main(rooms: int, trials: int) -> None:
    policy = Policy(reconnect_base=0.05, reconnect_cap=0.2, join_retry_base=0.05)
    rows: dict[str, list[float]] = {}
    async with open_platform(seed=True) as platform:
        info = platform.info
        assert info.user_id and info.agent_id and info.room_id
        room_ids = [info.room_id] + [
            platform.create_room(title=f"r{i}", participants=[info.user_id, info.agent_id]).id or ""
            for i in range(rooms - 1)
        ]
        await idle_rooms(platform, rooms, policy)  # warm-up
        for _ in range(trials):
            start, stop, ended = await idle_rooms(platform, rooms, policy)
            rows.setdefault(f"start-up, {rooms} idle rooms: run → started", []).append(start)
            rows.setdefault(f"graceful stop, {rooms} idle rooms: stop() → returned", []).append(
                stop
            )
            rows.setdefault(f"graceful stop, {rooms} idle rooms: stop() → run() returned", [])
            rows[f"graceful stop, {rooms} idle rooms: stop() → run() returned"].append(ended)
            busy = await busy_rooms(platform, room_ids, policy)
            rows.setdefault(
                f"graceful stop, {rooms} rooms finishing 50 ms later: stop() → run() returned",
                [],
            ).append(busy)
            for name, arm in phases(platform).items():
                took = await stop_in_phase(platform, policy, arm)
                rows.setdefault(f"stop during start-up ({name}): stop() → run() returned", [])
                rows[f"stop during start-up ({name}): stop() → run() returned"].append(took)
    print("| interval | n | median ms | min | p90 | max |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, samples in rows.items():
        print(row(name, samples))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rooms", type=int, default=100)
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the refused joins are logged, on purpose
    trio.run(main, args.rooms, args.trials)
