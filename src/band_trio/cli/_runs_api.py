"""`band-trio runs-api`: serve Hermes' runs API over an adapter until signalled.

The first SIGINT or SIGTERM stops every run (each gets the shutdown grace to
settle, so its event stream ends with `run.interrupted`) and closes the server,
exit 0. A run whose adapter ignores the stop cannot be ended from inside the
process (trio cannot cancel a shielded task): past every grace — or at a second
signal — the command names the runs still going and exits 1 without them,
rather than hang.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from .._ranges import Range, read_number
from ._agent import load_adapter
from ._exits import EXIT_CRASH, exit_at_once
from ._observe import add_flags as add_observe_flags
from ._observe import observing

if TYPE_CHECKING:
    from ..runs import RunsPolicy, RunsServer

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "runs-api",
        help="serve Hermes' runs API (/v1/runs: start, events, stop) over an adapter",
    )
    parser.add_argument(
        "--adapter",
        metavar="MODULE:FACTORY",
        help="a callable returning an Adapter (default: the built-in demo adapter)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1; another needs --allow-remote)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on a non-loopback --host (the key then guards it from the network)",
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument(
        "--api-key", help="the bearer key clients send (env BAND_RUNS_API_KEY; ≥ 16 characters)"
    )
    parser.add_argument("--max-runs", metavar="N", help="concurrent runs before 429 (default 10)")
    parser.add_argument(
        "--stop-wait",
        metavar="SECONDS",
        help="how long POST /stop?wait=true waits for a run to settle (default 5)",
    )
    parser.add_argument(
        "--retention",
        metavar="SECONDS",
        help="how long a finished run's status and events stay readable (default 3600)",
    )
    add_observe_flags(parser)
    parser.set_defaults(run=_run)


_RANGES = {
    "--max-runs": Range(1, 10_000, whole=True),
    "--stop-wait": Range(0, 3_600),
    "--retention": Range(0, 7 * 86_400),
}
"""Each flag's bounds: finite is not enough (`--max-runs 1e18` turned the cap off, a
`--retention` of ages kept every finished run's events for good)."""


def _number(flag: str, value: str | None) -> float | None:
    return None if value is None else read_number(flag, value, _RANGES[flag])


def _policy(args: argparse.Namespace) -> RunsPolicy:
    from ..runs import RunsPolicy

    changes: dict[str, float | int] = {}
    runs = _number("--max-runs", args.max_runs)
    if runs is not None:
        changes["max_concurrent_runs"] = int(runs)
    for flag, field, value in (
        ("--stop-wait", "stop_wait", args.stop_wait),
        ("--retention", "retention", args.retention),
    ):
        number = _number(flag, value)
        if number is not None:
            changes[field] = number
    return RunsPolicy().replace(**changes)


def _run(args: argparse.Namespace) -> int:
    from ..runs import check_api_key  # here: the other commands need not load hypercorn
    from ..server import check_bind

    seen = observing(args, "runs-api")
    key = check_api_key(args.api_key or os.environ.get("BAND_RUNS_API_KEY"))
    check_bind(
        args.host, what="the runs API", allow_remote=args.allow_remote, opt_in="--allow-remote"
    )
    policy = _policy(args)
    adapter = load_adapter(args.adapter)
    serving = partial(_serve, adapter, key, args.host, args.port, policy, args.allow_remote)
    return trio.run(seen.wrap(serving))


async def _serve(
    adapter: Any, key: str, host: str, port: int, policy: RunsPolicy, allow_remote: bool
) -> int:
    from ..runs import serve_runs_api

    served = trio.Event()

    async def serving(*, task_status: trio.TaskStatus[RunsServer]) -> None:
        await serve_runs_api(
            adapter,
            api_key=key,
            host=host,
            port=port,
            policy=policy,
            allow_remote=allow_remote,
            task_status=task_status,
        )
        served.set()

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            server: RunsServer = await nursery.start(serving)
            print(f"band-trio runs-api listening on {server.url}", flush=True)
            nursery.start_soon(_on_signals, server, signals, policy)
            await served.wait()
            nursery.cancel_scope.cancel(reason="the runs API closed")
    return EXIT_CRASH if server.service.overrun else 0


async def _on_signals(server: RunsServer, signals: Any, policy: RunsPolicy) -> None:
    """First signal: close gracefully. A second one, or the graces all spent: the runs
    still going are named and the process exits without them (cancelled by `_serve`
    as soon as the server has closed)."""
    async for signum in signals:
        live = len(server.service.active)
        print(
            f"band-trio runs-api: {signal.Signals(signum).name}: stopping {live} run(s) "
            "(again to force)",
            file=sys.stderr,
            flush=True,
        )
        server.close()
        break
    else:
        return
    graces = policy.shutdown_grace + policy.request_grace + 2 * policy.close_margin
    why = "not closed in time"
    with trio.move_on_after(graces):
        async for signum in signals:
            why = f"{signal.Signals(signum).name} again"
            break
    stuck = ", ".join(server.service.active) or "none"
    print(
        f"band-trio runs-api: {why}; exiting with run(s) still going: {stuck}",
        file=sys.stderr,
        flush=True,
    )
    exit_at_once(EXIT_CRASH)
