"""The floor of the scale rows, alone: the bare client of `band-trio bench --scale`.

    .venv/bin/python benchmarks/scale_floor.py [--rooms 10000] [--marks 1000] [--trials 3]

`band-trio bench --scale` runs this floor in the same run as band-trio, at every
size, and prints each scale row over it (docs/benchmarks.md § the scale rows).
This script runs the floor by itself, with the same code
(`band_trio.bench._scale_floor`, the client process, and `_bare`, its driver):
per trial, a fresh agent identity in `--rooms` fresh rooms, its start-up from
the socket's opening (every join pipelined, each room's `/next` on its last
join reply, 32 connections), `--marks` rooms' claimed messages marked at once,
and the socket's close. It prints the rows, pooled over the trials.
"""

from __future__ import annotations

import argparse

import trio

from band_trio.bench._bare import close_bare, open_bare
from band_trio.bench._bench import Bench, Options
from band_trio.bench._mass import floor_wave
from band_trio.bench._progress import Progress
from band_trio.bench._results import Row
from band_trio.bench._tier import create_identity
from band_trio.bench._watch import LogWatch
from band_trio.platform import open_platform
from band_trio.policy import PlatformPolicy


async def _driver(args: argparse.Namespace) -> None:
    options = Options(
        trials=args.trials, rooms=(args.rooms,), idle_rooms=(), floor_samples=0, remote_trials=0
    )
    policy = PlatformPolicy(log_entries=500_000)  # as the bench: defaults, a longer log
    async with open_platform(seed=True, policy=policy) as platform:
        user = platform.info.user_id
        assert user is not None
        bench = Bench(platform, LogWatch(platform), user, options, Progress(0, enabled=False))
        for trial in range(args.trials):
            identity = create_identity(bench, "floor", args.rooms, f"floor {trial}")
            async with trio.open_nursery() as nursery:
                bare = await open_bare(bench, nursery, identity)
                await floor_wave(bare, args.marks)
                await close_bare(bare, busy=False)
    print("| scenario | rooms | metric | n | fail | p50 ms | p99 ms | max ms |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for series in bench.series.values():
        r = Row.of(series, {}, None)
        print(
            f"| {r.scenario} | {r.rooms} | {r.metric} | {r.n} | {r.failures} | "
            f"{r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.max_ms:.1f} |"
        )
    for note in bench.notes:
        print(f"note: {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rooms", type=int, default=10_000)
    parser.add_argument("--marks", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=3)
    trio.run(_driver, parser.parse_args())


if __name__ == "__main__":
    main()
