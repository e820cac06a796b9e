"""The one-room signal rows, two band-trio trees side by side, trials alternating.

    .venv/bin/python benchmarks/hot_path.py --trials 60 [--base OLD/src] [--json FILE]
    .venv/bin/python benchmarks/hot_path.py --trials 200 --pids FILE   # for py-spy

What `band-trio bench` measures at one room (interrupt → cancelled, interrupt →
`processed`, stop → cancelled, stop → `working: false`, play → `/next`, play →
re-entered), for two agents at once on one embedded platform: `new` (this tree)
and `base` (the `band_trio` package of another tree, put first on the agent's
`PYTHONPATH`). Each runs the bench's own subject adapter and trials, one room,
no busy rooms; trials alternate new, base, base, new, ... so that the machine's
drift hits both alike. The floors are measured in the same run, before and
after the trials. Without `--base` both agents run this tree: the spread
between the two is the noise of the method.

A third participant, `bare` (`cancel_floor.py`, off with `--no-bare`), takes its
turn in every round: a bare trio-websocket client whose held task is cancelled
by the same signal and then posts `working: false` through band-trio's HTTP
pool. Its rows are the floor of `signal → adapter cancelled` and of
`signal → working:false arrives` with nothing of a runtime in between.

The load average (`os.getloadavg`) is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio
from cancel_floor import floor_trial

from band_trio.bench import _tier
from band_trio.bench._bench import Bench, Options
from band_trio.bench._floors import COMPOSED, measure_floors
from band_trio.bench._progress import Progress
from band_trio.bench._protocol import ORPHAN_ENV
from band_trio.bench._results import Row, Series, percentile
from band_trio.bench._signals import interrupt_trial, stop_play_trial
from band_trio.bench._subject import environment, start
from band_trio.bench._tier import create_identity, open_tier, settle, teardown
from band_trio.bench._watch import LogWatch
from band_trio.platform import open_platform
from band_trio.policy import PlatformPolicy

HERE = Path(__file__).resolve().parent
SOURCES: dict[str, str | None] = {}
"""Label → the src directory its agent imports band_trio from (None: this tree)."""
TRACE: dict[str, str] = {}
"""Label → the file its agent writes its hop trace to (`_hop_subject`)."""


async def _spawn(nursery, identity, rest_url, ws_url, *, grace=30.0):  # type: ignore[no-untyped-def]
    env = {**environment(identity, rest_url, ws_url), ORPHAN_ENV: "1"}
    src = SOURCES[identity.runtime]
    if src is not None:
        env["PYTHONPATH"] = src
    argv = [sys.executable, "-m", "band_trio", "agent"]
    subject = "band_trio.bench._trio_subject:adapter"
    if TRACE.get(identity.runtime):  # the same subject, with its hops stamped
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, str(Path(__file__).parent)]))
        env["BAND_HOP_TRACE"] = TRACE[identity.runtime]
        subject = "_hop_subject:adapter"
    argv += ["--adapter", subject, "--shutdown-grace", str(grace)]
    return await start(nursery, identity, argv, env, stdin=subprocess.PIPE)


async def run(args: argparse.Namespace) -> dict[str, object]:
    _tier.spawn = _spawn  # type: ignore[assignment]
    labels = ["new", "base"]
    # the agents' environment is rebuilt from scratch (`environment`): without its
    # own PYTHONPATH an agent would import the venv's installed tree, not this one
    SOURCES.update(new=str(HERE.parent / "src"), base=args.base)
    if args.trace:
        TRACE.update(new=args.trace + ".new.json", base=args.trace + ".base.json")
    options = Options(
        trials=args.trials, rooms=(1,), idle_rooms=(), floor_samples=args.floor, remote_trials=0
    )
    policy = PlatformPolicy(log_entries=500_000)
    load = [os.getloadavg()]
    async with open_platform(seed=True, policy=policy) as platform:
        user = platform.info.user_id
        assert user is not None
        bench = Bench(platform, LogWatch(platform), user, options, Progress(1, enabled=False))
        floor_id = create_identity(bench, "floor", 1, "floor")
        floor_series: dict[str, Series] = {}

        async def floor() -> None:  # before and after the trials, pooled
            for s in await measure_floors(
                platform, bench.watch, floor_id, floor_id.rooms[0], args.floor, options.settle
            ):
                floor_series.setdefault(s.metric, Series("floor", "floor", 1, s.metric))
                floor_series[s.metric].samples.extend(s.samples)

        await floor()
        async with trio.open_nursery() as nursery:
            tiers = []
            for label in labels:
                identity = create_identity(bench, label, 1, f"{label}-1")  # type: ignore[arg-type]
                tiers.append(await open_tier(bench, nursery, identity, "start-up"))
            bare = None
            if not args.no_bare:
                bare_id = create_identity(bench, "floor", 1, "bare")
                argv = [sys.executable, str(Path(__file__).parent / "cancel_floor.py")]
                argv += [platform.info.ws_url, platform.info.rest_url, bare_id.agent_id]
                argv += [bare_id.api_key, bare_id.rooms[0]]
                env = {**environment(bare_id, platform.info.rest_url, platform.info.ws_url)}
                env[ORPHAN_ENV] = "1"
                env["PYTHONPATH"] = str(SOURCES["new"])
                bare = await start(nursery, bare_id, argv, env, stdin=subprocess.PIPE)
                with trio.fail_after(30):
                    await bare.wait("ready", "floor")
            if args.pids:
                pids = json.dumps({t.runtime: t.subject.process.pid for t in tiers})
                await trio.Path(args.pids).write_text(pids)
            for i in range(args.trials):
                order = tiers if i % 2 == 0 else tiers[::-1]
                for tier in order:
                    await interrupt_trial(tier, agent_wide=False)
                for tier in order[::-1]:
                    await stop_play_trial(tier)
                if bare is not None:
                    await _bare_round(bench, bare, i, platform)
            frames = {
                t.runtime: bench.watch.stamps(("control", t.identity.agent_id)) for t in tiers
            }
            for tier in tiers:
                await settle(tier, ("interrupt", "stop", "play"))
                await teardown(tier, "teardown", busy=False)
            if bare is not None:
                await bare.terminate(5.0)
        await floor()
    load.append(os.getloadavg())
    floors_ms = {m: Row.of(s, {}, None).p50_ms for m, s in floor_series.items()}
    composed = {n: sum(floors_ms[p] for p in parts) for n, parts in COMPOSED.items()}
    rows = []
    for (runtime, scenario, _, metric), s in sorted(bench.series.items()):
        if runtime == "floor" or scenario in ("start-up", "teardown"):
            continue
        ordered = [x * 1000 for x in s.samples]  # in trial order, for the paired differences
        ms = sorted(ordered)
        rows.append(
            {
                "runtime": runtime,
                "scenario": scenario,
                "metric": metric,
                "n": len(ms),
                "failures": s.failures,
                "p50": percentile(ms, 0.5),
                "p99": percentile(ms, 0.99),
                "floor": composed.get(s.floor or "", float("nan")),
                "leaked": bench.leaked.get((runtime, scenario, 1)),
                "samples": ordered,
            }
        )
    return {
        "frames": frames,
        "load": load,
        "floors_ms": floors_ms,
        "composed_ms": composed,
        "rows": rows,
    }


async def _bare_round(bench: Bench, bare, i: int, platform) -> None:  # type: ignore[no-untyped-def]
    """One interrupt and one stop (then an unmeasured play) for the bare client."""
    for j, mode in enumerate(("interrupt", "stop")):
        scenario = mode
        cancelled = bench.metric("bare", scenario, 1, "signal → adapter cancelled", "push")
        idle = bench.metric("bare", scenario, 1, "signal → working:false arrives", "push+rest_in")
        try:
            took = await floor_trial(
                bare, 2 * i + j, platform, bench.watch, bench.options.settle, mode
            )
        except trio.TooSlowError:
            cancelled.add(None, "the bare client missed its signal")
            idle.add(None, "the bare client missed its signal")
            continue
        cancelled.add(took[0])
        idle.add(took[1])
        if mode == "stop":
            platform.send_control(bare.identity.agent_id, "play", room_id=bare.identity.rooms[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--floor", type=int, default=100, help="floor samples per measurement")
    parser.add_argument("--base", help="the src directory of the tree to compare with")
    parser.add_argument("--json")
    parser.add_argument("--trace", help="trace both agents' hops to FILE.new.json, FILE.base.json")
    parser.add_argument("--no-bare", action="store_true", help="no bare-client floor trials")
    parser.add_argument("--pids", help="write the agents' pids to this file once started")
    args = parser.parse_args()
    if args.base is not None:
        args.base = str(Path(args.base).resolve())
    result = trio.run(run, args)
    print(f"load: {result['load']}")
    print("floors p50 ms:", {k: round(v, 3) for k, v in result["floors_ms"].items()})  # type: ignore[union-attr]
    print("| scenario | metric | floor | runtime | n | fail | p50 | p99 | own p50 | leaked |")
    print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in result["rows"]:  # type: ignore[attr-defined]
        own = r["p50"] - r["floor"]
        print(
            f"| {r['scenario']} | {r['metric']} | {r['floor']:.2f} | {r['runtime']} | {r['n']} "
            f"| {r['failures']} | {r['p50']:.2f} | {r['p99']:.2f} | {own:.2f} | {r['leaked']} |"
        )
    _paired(result["rows"])  # type: ignore[arg-type]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


_CANCELLED, _IDLE = "signal → adapter cancelled", "signal → working:false arrives"
BARE = {
    ("interrupt", _CANCELLED): ("bare", "interrupt", _CANCELLED),
    ("stop", _CANCELLED): ("bare", "stop", _CANCELLED),
    # one POST after the cancel: `processed` for band-trio, `working: false` for the bare client
    ("interrupt", "signal → processed arrives"): ("bare", "interrupt", _IDLE),
    ("stop", _IDLE): ("bare", "stop", _IDLE),
}
"""band-trio's metric → the bare client's that is its floor."""


def _paired(rows: list[dict[str, Any]]) -> None:
    """Per metric, the median of the round-by-round differences new - base and, where
    the bare client has the metric, new - bare and base - bare: the rounds' drift cancels."""
    by = {(r["runtime"], r["scenario"], r["metric"]): r for r in rows}
    print("paired medians, ms (round by round, trials with no failure in any runtime):")
    for (runtime, scenario, metric), new in sorted(by.items()):
        base = by.get(("base", scenario, metric))
        if runtime != "new" or base is None or new["failures"] or base["failures"]:
            continue
        line = f"  {scenario} | {metric}: new - base {_median_diff(new, base):+.3f}"
        bare = by.get(BARE.get((scenario, metric), ("", "")))
        if bare is not None and not bare["failures"]:
            line += f", new - bare {_median_diff(new, bare):+.3f}"
            line += f", base - bare {_median_diff(base, bare):+.3f}"
        print(line)


def _median_diff(a: dict[str, Any], b: dict[str, Any]) -> float:
    return statistics.median(x - y for x, y in zip(a["samples"], b["samples"], strict=False))


if __name__ == "__main__":
    main()
