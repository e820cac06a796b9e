"""`band-trio bench`: the cancellation-latency benchmark (docs/benchmarks.md)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from .. import errors
from ..policy import PlatformPolicy
from ._collector import collect_rarely

if TYPE_CHECKING:
    from ..bench import Options, Report

EXIT_INTERRUPTED = 130

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "bench",
        help="measure cancellation latency: band-trio (and band-sdk) on the embedded platform",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="8 trials, 1 and 100 rooms: about 30 s; about 3.5 min with --peer band-sdk "
        "(2 cores, docs/benchmarks.md)",
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help="the scale rows alone, each beside its floor (a bare client, same run): start-up "
        "and teardown at 1,000 and 10,000 rooms, an agent-wide interrupt under the load of "
        "1,000 busy rooms, and the mass abort of 1,000 held turns (docs/benchmarks.md)",
    )
    parser.add_argument(
        "--peer",
        choices=["band-sdk"],
        help="also run the real band-sdk 6.0.1 agent, trials alternating (the `peer` extra)",
    )
    parser.add_argument("--trials", type=int, metavar="N", help="trials per scenario and size")
    parser.add_argument(
        "--rooms", metavar="N,N", help="room counts for the signal scenarios (default 1,100,1000)"
    )
    parser.add_argument(
        "--idle-rooms", metavar="N,N", help="room counts for idle start-up/teardown (default 10000)"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every row to FILE")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="plot the distributions")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(run=_run)


def _sizes(flag: str, value: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    if value is None:
        return default
    try:
        sizes = tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        sizes = ()
    if not sizes or any(not 1 <= n <= 100_000 for n in sizes):
        raise errors.ConfigurationError(
            f"{flag} takes room counts 1..100000 like 1,100, not {value!r}"
        )
    return sizes


def _writable(flag: str, path: Path | None) -> None:
    if path is None:
        return
    folder = path.resolve().parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise errors.ConfigurationError(f"{flag}: cannot write {path}: no writable folder {folder}")


def _options(args: argparse.Namespace) -> Options:
    from ..bench import Options

    peer = args.peer == "band-sdk"
    if peer and importlib.util.find_spec("band") is None:
        raise errors.ConfigurationError(
            "--peer band-sdk needs the band-sdk agent: pip install 'band-trio[peer]'"
        )
    if args.quick and args.scale:
        raise errors.ConfigurationError("--quick and --scale are two presets: choose one")
    if args.quick:
        base = Options.quick(peer=peer)
    elif args.scale:
        base = Options.scale(peer=peer)
    else:
        base = Options.full(peer=peer)
    trials = base.trials if args.trials is None else args.trials
    if not 1 <= trials <= 10_000:
        raise errors.ConfigurationError(f"--trials takes 1..10000, not {trials}")
    return Options(
        trials=trials,
        rooms=_sizes("--rooms", args.rooms, base.rooms),
        idle_rooms=_sizes("--idle-rooms", args.idle_rooms, base.idle_rooms)
        if args.idle_rooms
        else base.idle_rooms,
        floor_samples=base.floor_samples,
        remote_trials=min(trials, base.remote_trials) if args.trials else base.remote_trials,
        startup_deadline=base.startup_deadline,
        peer=peer,
        scenarios=base.scenarios,
        scale_floor=base.scale_floor,
        mass_trials=min(trials, base.mass_trials) if args.trials else base.mass_trials,
    )


async def _until_signalled(run: Callable[[], Awaitable[Report]]) -> Report | None:
    """The run, or None once SIGINT/SIGTERM cancelled it (its agents and peers are
    stopped on the way out: each is owned by the nursery that started it)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            result: list[Report] = []

            async def main() -> None:
                result.append(await run())
                nursery.cancel_scope.cancel()

            nursery.start_soon(main)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break
    return result[0] if result else None


def _run(args: argparse.Namespace) -> int:
    from ..bench import run_bench, table, write_json  # the driver loads the platform

    options = _options(args)
    _writable("--json", args.json)
    _writable("--plot", args.plot)
    if args.plot is not None:
        from ..bench import check_plotting

        check_plotting()
    # The platform runs in this process: with its collector as `band-trio platform` sets
    # it (a full collection of the whole heap every few seconds otherwise), so the
    # scale rows are measured on the platform as it ships.
    collect_rarely(PlatformPolicy().collector_threshold)
    report = trio.run(
        _until_signalled, partial(run_bench, options, show_progress=not args.no_progress)
    )
    if report is None:
        print(
            "\nband-trio bench: interrupted; every process it started is stopped", file=sys.stderr
        )
        return EXIT_INTERRUPTED
    print(table(report))
    if args.json is not None:
        write_json(report, str(args.json))
    if args.plot is not None:
        from ..bench import plot

        plot(report, str(args.plot))
    failed = sum(r.failures for r in report.rows)
    leaked = sum(r.leaked_tasks or 0 for r in report.rows)
    if failed or leaked or report.log_entries_lost:
        print(
            f"band-trio bench: {failed} failed trials, {leaked} leaked tasks, "
            f"{report.log_entries_lost} log entries lost",
            file=sys.stderr,
        )
        return 1
    return 0
