"""The agent's own CPU at start-up and teardown of many idle rooms, in one process.

    .venv/bin/python benchmarks/scale_profile.py [--rooms 2000] [--profile teardown|startup]
        [--top 30]

The embedded platform and an `Agent` (a no-op adapter) in one trio run: the
agent starts with `--rooms` rooms and serves until every room has had its first
`/next`, then stops gracefully. The teardown (`Agent.stop()`) runs only the
agent's code (the platform sees one websocket close), so its CPU time here is
the agent's own, free of the other processes on a shared machine:
`process_time` around it, ÷ rooms. Start-up's CPU is the platform's and the
agent's together (cProfile shows which is which). Also printed: the trio tasks
alive once every room is synced, ÷ rooms (a trio instrument counts them), and
the process's RSS then. `--profile` prints the top of a cProfile of that phase
(by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import time
import tracemalloc
from pathlib import Path

import trio

from band_trio import Adapter, Agent, Policy, Turn
from band_trio.platform import open_platform
from band_trio.policy import PlatformPolicy


class _Idle(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        await turn.reply("done")


class _Tasks(trio.abc.Instrument):
    def __init__(self) -> None:
        self.living = 0

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.living += 1

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.living -= 1


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _allocated(
    before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, rooms: int, top: int
) -> None:
    """What the start-up left allocated, by the innermost frame not in the platform's
    own modules (the agent's share), in bytes a room."""
    mine = [tracemalloc.Filter(False, "*band_trio/platform/*")]
    stats = after.filter_traces(mine).compare_to(before.filter_traces(mine), "lineno")
    total = sum(s.size_diff for s in stats)
    print(f"allocated by the agent's side: {total / rooms:.0f} B a room")
    for stat in stats[:top]:
        print(f"  {stat.size_diff / rooms:7.0f} B a room  {stat.traceback[0]}")


def _profiled(profiler: cProfile.Profile | None, top: int) -> None:
    if profiler is None:
        return
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())


async def _main(args: argparse.Namespace) -> None:
    policy = PlatformPolicy(log_entries=500_000)
    async with open_platform(seed=True, policy=policy) as platform:
        info = platform.info
        assert info.user_id and info.agent_id and info.api_key
        agent_id = info.agent_id
        for i in range(args.rooms - 1):
            platform.create_room(title=f"room {i}", participants=[info.user_id, agent_id])
        agent = Agent(
            _Idle(),
            agent_id=agent_id,
            api_key=info.api_key,
            rest_url=info.rest_url,
            ws_url=info.ws_url,
            policy=Policy(shutdown_grace=30),
        )

        seen = [0, 0]  # log position, `/next` requests of the agent so far

        def nexts() -> int:  # re-checked on every log entry: read only the new ones
            for e in platform.log(seen[0]):
                seen[0] = e.seq + 1
                if e.kind == "rest" and e.agent_id == agent_id and (e.path or "").endswith("/next"):
                    seen[1] += 1
            return seen[1]

        tasks = _Tasks()
        async with trio.open_nursery() as nursery:
            before = trio.lowlevel.current_statistics().tasks_living
            rss0 = _rss_kib()
            if args.memory:
                tracemalloc.start(1)
                snap0 = tracemalloc.take_snapshot()
            profiler = cProfile.Profile() if args.profile == "startup" else None
            t0, c0 = time.perf_counter(), time.process_time()
            if profiler:
                profiler.enable()
            trio.lowlevel.add_instrument(tasks)
            await nursery.start(agent.run)
            joined = time.perf_counter() - t0
            await platform.wait_until(lambda: nexts() >= args.rooms)
            synced, cpu = time.perf_counter() - t0, time.process_time() - c0
            if profiler:
                profiler.disable()
            await trio.sleep(0.5)  # settle: the rooms are idle
            alive = tasks.living
            rss = _rss_kib() - rss0
            if args.memory:
                _allocated(snap0, tracemalloc.take_snapshot(), args.rooms, args.top)
                tracemalloc.stop()
            print(
                f"start-up: joined {joined * 1000:.0f} ms, synced {synced * 1000:.0f} ms, "
                f"process CPU (platform + agent) {cpu * 1000:.0f} ms"
            )
            print(
                f"idle: {alive} tasks of the agent ({alive / args.rooms:.2f} a room; "
                f"{before} before it), RSS +{rss} KiB ({rss / args.rooms:.1f} KiB a room, "
                "the platform's share included)"
            )
            _profiled(profiler, args.top)
            profiler = cProfile.Profile() if args.profile == "teardown" else None
            t1, c1 = time.perf_counter(), time.process_time()
            if profiler:
                profiler.enable()
            if args.gc == "off":
                gc.disable()
            elif args.gc == "freeze":
                gc.freeze()
            result = await agent.stop()
            gc.enable()
            if profiler:
                profiler.disable()
            wall, cpu = time.perf_counter() - t1, time.process_time() - c1
            trio.lowlevel.remove_instrument(tasks)
            print(
                f"teardown: {wall * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms "
                f"({cpu * 1e6 / args.rooms:.0f} us a room); graceful {result.graceful}; "
                f"load {os.getloadavg()[0]:.1f}"
            )
            _profiled(profiler, args.top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rooms", type=int, default=2000)
    parser.add_argument("--profile", choices=("teardown", "startup"))
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--memory", action="store_true", help="where start-up's memory went")
    parser.add_argument(
        "--gc", choices=("on", "off", "freeze"), default="on", help="the collector at teardown"
    )
    trio.run(_main, parser.parse_args())


if __name__ == "__main__":
    main()
