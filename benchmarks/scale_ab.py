"""The scale rows of `band-trio bench`, before and after, alternating in one run.

    .venv/bin/python benchmarks/scale_ab.py --arm new=src --arm old=OLD/src \
        [--idle 1000,10000] [--busy 1000] [--trials 20] [--rounds 3] [--json FILE]
        [--profile DIR]

One embedded platform (this tree's) in this process, as `band-trio bench` runs
it; each arm is the `band-trio agent` under test run from another `src/`
folder (`PYTHONPATH`), so the only difference between the arms is the runtime.
Arms alternate in every round (A, B, then B, A). Per round and arm:

- each idle size: start-up (launched → all rooms joined / synced), the agent's
  RSS once synced (÷ rooms: memory per idle room), SIGTERM → exit; and the
  agent's own CPU time (user + system) up to then and for the teardown (read from
  /proc, and from the reaped child's rusage: steadier than wall time on a shared
  machine);
- the busy size: start-up, the load of `band-trio bench` (25 messages a second
  over the busy rooms), `--trials` agent-wide interrupts (signal → the target
  room's `processed`, and → the last aborted busy room's mark: the whole wave),
  then SIGTERM with every busy room 1 s from the end of its turn.

With `--profile DIR`, the new arm's agent runs under `py-spy record` (raw
folded stacks into DIR, one file per phase's process); with `--profile-teardown
DIR`, py-spy is attached to the new arm's idle agents just before their SIGTERM
(non-blocking sampling: the teardown alone).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import trio

from band_trio.bench import _tier
from band_trio.bench._bench import Bench, Options, since, timed
from band_trio.bench._progress import Progress
from band_trio.bench._protocol import ORPHAN_ENV
from band_trio.bench._results import percentile
from band_trio.bench._signals import _held, _signal
from band_trio.bench._subject import Identity, environment, start
from band_trio.bench._subject import _command as subject_command
from band_trio.bench._watch import LogWatch
from band_trio.platform import open_platform
from band_trio.policy import PlatformPolicy


@dataclass
class Arm:
    name: str
    src: Path
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, key: str, value: float | None) -> None:
        self.samples.setdefault(key, [])
        if value is not None:
            self.samples[key].append(value)
        else:
            self.samples.setdefault(key + " failures", []).append(1.0)


PROFILE: Path | None = None
TEARDOWN_PROFILE: Path | None = None
ARM: Arm | None = None


def _rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


async def _spawn(nursery: trio.Nursery, identity: Identity, rest_url: str, ws_url: str, **_: Any):  # type: ignore[no-untyped-def]
    """`_tier.spawn`, with the arm's `src/` first on the agent's path."""
    assert ARM is not None
    env = {**environment(identity, rest_url, ws_url), ORPHAN_ENV: "1"}
    env["PYTHONPATH"] = str(ARM.src.resolve())
    argv = subject_command(identity, 30.0)
    subject = await start(nursery, identity, argv, env, stdin=subprocess.PIPE)
    if PROFILE is not None and ARM.name == "new":  # attached: SIGTERM still goes to the agent
        out = PROFILE / f"{ARM.name}-{len(identity.rooms)}-{time.monotonic_ns()}.txt"
        spy = [str(Path(sys.executable).parent / "py-spy"), "record", "-f", "raw", "-r", "200",
               "--pid", str(subject.process.pid), "-o", str(out)]  # fmt: skip
        nursery.start_soon(
            partial(trio.run_process, spy, capture_stdout=True, capture_stderr=True, check=False)
        )
    return subject


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds the process has used so far (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _load() -> str:
    return os.getloadavg().__repr__()


async def _idle(bench: Bench, arm: Arm, n: int) -> None:
    async with trio.open_nursery() as nursery:
        identity = _tier.create_identity(
            bench, "band-trio", n, f"{arm.name}-idle-{n}-{time.monotonic_ns()}"
        )
        tier = await _tier.open_tier(bench, nursery, identity, "start-up")
        _collect(bench, arm, n)
        launched = tier.subject.launched
        for what, stamps in (("joined", bench.watch.joined), ("synced", bench.watch.synced)):
            got = sorted(t - launched for t in stamps.get(identity.agent_id, {}).values())
            if got:
                qs = [got[int(q * (len(got) - 1))] for q in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0)]
                shown = " ".join(f"{q:.2f}" for q in qs)
                print(f"{arm.name} @{n} {what} at (0,10,50,90,99,100%): {shown} s", file=sys.stderr)
        routes: dict[str, int] = {}
        for entry in bench.platform.log(0):
            if entry.kind == "rest" and entry.agent_id == identity.agent_id:
                route = (entry.path or "").rsplit("/", 1)[-1].split("?")[0]
                routes[route] = routes.get(route, 0) + 1
        print(f"{arm.name} @{n} requests: {routes}", file=sys.stderr)
        warned = [line for line in tier.subject.stderr_tail if "WARNING" in line or "ERROR" in line]
        if warned:
            print(f"{arm.name} @{n}: {len(warned)} warnings, e.g. {warned[:3]}", file=sys.stderr)
        pid = tier.subject.process.pid
        rss = _rss_kib(pid)
        arm.add(f"rss KiB/room @{n}", None if rss is None else rss / n)
        # the agent's own CPU: up to now (start-up, as it is idle once synced), and
        # SIGTERM → exit (what the reaped child used in all, less what it had used)
        before, reaped = _cpu_s(pid), _children_cpu_s()
        arm.add(f"agent CPU to synced, ms @{n}", None if before is None else before * 1000)
        if TEARDOWN_PROFILE is not None and arm.name == "new":
            out = TEARDOWN_PROFILE / f"{arm.name}-{n}-teardown-{time.monotonic_ns()}.txt"
            spy = [str(Path(sys.executable).parent / "py-spy"), "record", "-f", "raw", "-r", "250",
                   "--nonblocking", "--pid", str(pid), "-o", str(out)]  # fmt: skip
            run = partial(trio.run_process, capture_stdout=True, capture_stderr=True, check=False)
            nursery.start_soon(run, spy)
            await trio.sleep(1.0)  # attached before the signal
        await _tier.teardown(tier, "teardown", busy=False)
        if before is not None and PROFILE is None and tier.subject.process.returncode is not None:
            arm.add(
                f"agent CPU SIGTERM → exit, ms @{n}", (_children_cpu_s() - reaped - before) * 1000
            )
        _collect(bench, arm, n)


def _collect(bench: Bench, arm: Arm, n: int) -> None:
    """Move the bench's series for size `n` into the arm's samples."""
    for key, series in list(bench.series.items()):
        _, scenario, rooms, metric = key
        for s in series.samples:
            arm.add(f"{scenario}: {metric} @{rooms}", s * 1000)
        for _ in range(series.failures):
            arm.add(f"{scenario}: {metric} @{rooms}", None)
        del bench.series[key]


async def _busy(bench: Bench, arm: Arm, n: int, trials: int) -> None:
    async with trio.open_nursery() as nursery:
        identity = _tier.create_identity(
            bench, "band-trio", n, f"{arm.name}-busy-{n}-{time.monotonic_ns()}"
        )
        tier = await _tier.open_tier(bench, nursery, identity, "start-up")
        try:
            async with trio.open_nursery() as load_nursery:
                await load_nursery.start(_tier.load, [tier], bench.options.load_rate)
                for _ in range(trials):
                    await _wave(bench, arm, tier)
                load_nursery.cancel_scope.cancel()
            await _tier.settle(tier, ("agent interrupt",))
            leaked = bench.leaked.get(("band-trio", "agent interrupt", n))
            arm.add(f"leaked tasks @{n}", None if leaked is None else float(leaked))
        finally:
            await _tier.teardown(tier, "teardown", busy=True)
        _collect(bench, arm, n)


async def _wave(bench: Bench, arm: Arm, tier: _tier.Tier) -> None:
    """One agent-wide interrupt: the target's mark, and the last mark of the wave."""
    n = tier.rooms
    message = await _held(tier)
    if message is None:
        arm.add(f"agent interrupt: → processed (target) @{n}", None)
        return
    watch = bench.watch
    watch.pump()
    subject = tier.subject
    # the busy turns running now: entered, not yet marked
    open_ = {
        m
        for m in tier.posted
        if subject.count("enter", m)
        and not watch.indexed(("processed", m))
        and not watch.indexed(("failed", m))
    }
    position, sent = await _signal(tier, "interrupt", agent_wide=True)
    mark = await timed(10.0, lambda: watch.wait(("processed", message), position))
    arm.add(f"agent interrupt: → processed (target) @{n}", _ms(since(mark, sent)))
    # the whole wave: every busy message marked after the signal, the last one's stamp
    last: list[float] = []

    def all_marked() -> bool:
        watch.pump()
        for m in list(open_):
            stamp = watch.first_after(("processed", m), position)
            if stamp is None:
                stamp = watch.first_after(("failed", m), position)
            if stamp is not None:
                open_.discard(m)
                last.append(stamp)
        # a message not in a turn at the signal is marked later by its own turn: the
        # wave is over once nothing new was marked for a while (see below)
        return not open_

    aborted = len(open_)
    with trio.move_on_after(10.0):
        await bench.platform.wait_until(all_marked)
    wave = [t for t in last if sent is not None and t - sent < 2.9]
    arm.add(
        f"agent interrupt: → last mark of the wave @{n}",
        _ms(max(wave) - sent) if wave and sent else None,
    )
    arm.add(f"agent interrupt: marks in the wave @{n}", float(len(wave)))
    # every aborted turn's mark, however late (10 s at most), and how it got there
    arm.add(
        f"agent interrupt: → last mark, every aborted turn @{n}",
        _ms(max(last) - sent) if last and sent and not open_ else None,
    )
    arm.add(f"agent interrupt: aborted turns left unmarked at 10 s @{n}", float(len(open_)))
    arm.add(f"agent interrupt: aborted turns @{n}", float(aborted))
    arm.add(f"agent interrupt: aborted turns unmarked at 2.9 s @{n}", float(aborted - len(wave)))
    stamps = sorted(last)
    gaps = sum(1 for a, b in itertools.pairwise(stamps) if b - a > _GAP)
    arm.add(f"agent interrupt: mark bursts (gaps > {_GAP:g} s) @{n}", float(gaps + 1))
    _passes(bench, arm, tier, position)


_GAP = 0.25
"""Marks of one wave follow each other within milliseconds at the platform's rate; a
gap this long between two of them is a mark cut off and sent again a grace later."""


def _passes(bench: Bench, arm: Arm, tier: _tier.Tier, position: int) -> None:
    """After the signal: the most `/processed` POSTs one message took (a mark cut off
    at the platform and sent again), and the agent's `/next` and unprocessed-list
    requests (a room whose mark was left ack-pending makes a pass before it retries
    the mark; a mark cut off while it still waited for a connection never reached
    the platform, so it shows only there and in the bursts)."""
    n, agent = tier.rooms, tier.identity.agent_id
    posts: dict[str, int] = {}
    scans = 0
    for entry in bench.platform.log(position):
        if entry.kind != "rest" or entry.agent_id != agent or entry.path is None:
            continue
        if entry.path.endswith("/processed"):
            posts[entry.path] = posts.get(entry.path, 0) + 1
        elif entry.method == "GET" and entry.path.endswith(("/messages", "/next")):
            scans += 1
    arm.add(f"agent interrupt: most /processed POSTs of one message @{n}",
            float(max(posts.values(), default=0)))  # fmt: skip
    arm.add(f"agent interrupt: GET /next and /messages after the signal @{n}", float(scans))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def _summary(arms: list[Arm]) -> str:
    keys: list[str] = []
    for arm in arms:
        keys += [k for k in arm.samples if k not in keys]
    lines = ["| metric | " + " | ".join(f"{a.name} p50 (min-max) [n]" for a in arms) + " |"]
    lines.append("|---" * (len(arms) + 1) + "|")
    for key in keys:
        cells = []
        for arm in arms:
            xs = sorted(arm.samples.get(key, []))
            if not xs:
                cells.append("-")
            elif "failures" in key:
                cells.append(str(len(xs)))
            else:
                p50 = percentile(xs, 0.5)
                p99 = percentile(xs, 0.99)
                cells.append(f"{p50:.1f} p99 {p99:.1f} ({xs[0]:.1f}-{xs[-1]:.1f}) [{len(xs)}]")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> None:
    global ARM
    arms = [Arm(name, Path(src)) for name, _, src in (a.partition("=") for a in args.arm)]
    _tier.spawn = _spawn  # type: ignore[assignment]
    options = Options(trials=args.trials, rooms=(), idle_rooms=(), floor_samples=0, remote_trials=0)
    policy = PlatformPolicy(log_entries=500_000)
    loads: list[str] = []
    async with open_platform(seed=True, policy=policy) as platform:
        user = platform.info.user_id
        assert user is not None
        watch = LogWatch(platform)
        bench = Bench(platform, watch, user, options, Progress(1, enabled=False))
        for round_ in range(args.rounds):
            order = arms if round_ % 2 == 0 else arms[::-1]
            for arm in order:
                ARM = arm
                loads.append(f"round {round_} {arm.name}: load {_load()}")
                print(loads[-1], file=sys.stderr, flush=True)
                for n in args.idle:
                    await _idle(bench, arm, n)
                for n in args.busy:
                    await _busy(bench, arm, n, args.trials)
                print(_summary(arms), file=sys.stderr, flush=True)
            bench.notes.clear()
    print(_summary(arms))
    print("\n".join(loads))
    if args.json is not None:
        args.json.write_text(
            json.dumps({"arms": {a.name: a.samples for a in arms}, "loads": loads})
        )


def _sizes(value: str) -> list[int]:
    return [int(v) for v in value.split(",") if v.strip()]


def main() -> None:
    global PROFILE, TEARDOWN_PROFILE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", required=True, help="NAME=SRC_FOLDER")
    parser.add_argument("--idle", type=_sizes, default=[1000, 10000])
    parser.add_argument("--busy", type=_sizes, default=[1000])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", type=Path)
    parser.add_argument(
        "--profile-teardown", type=Path, help="py-spy on the new arm's idle teardowns only"
    )
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        PROFILE = args.profile
    if args.profile_teardown is not None:
        args.profile_teardown.mkdir(parents=True, exist_ok=True)
        TEARDOWN_PROFILE = args.profile_teardown
    trio.run(_main, args)


if __name__ == "__main__":
    main()
