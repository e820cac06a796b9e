"""`band-trio platform`: run the embedded platform until interrupted."""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..errors import ConfigurationError
from ..policy import PlatformPolicy
from ._collector import collect_rarely, freeze_for_exit

if TYPE_CHECKING:
    from ..wire.admin import ReadyInfo

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "platform", help="run the embedded Band platform (REST + websocket + admin API)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="a loopback address to bind (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one")
    parser.add_argument("--db", type=Path, help="sqlite file: makes the state durable")
    parser.add_argument(
        "--seed", action="store_true", help="create one agent, one user and one room"
    )
    parser.add_argument("--ready-file", type=Path, help="write the URLs and ids here as JSON")
    parser.add_argument(
        "--console",
        action="store_true",
        help="also serve the browser console (its URL is printed and in the ready file)",
    )
    parser.add_argument(
        "--outbound-queue",
        metavar="N",
        help="frames a websocket may have waiting before the platform stops reading it "
        f"(default {PlatformPolicy().outbound_queue})",
    )
    parser.set_defaults(run=_run)


OUTBOUND_QUEUE_MAX = 1 << 20
"""The largest `--outbound-queue`: a million frames waiting for one socket is already
far past any use (the queue is a bound, and backpressure makes a small one enough)."""


def _policy(args: argparse.Namespace) -> PlatformPolicy:
    if args.outbound_queue is None:
        return PlatformPolicy()
    text = args.outbound_queue.strip()
    size = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= size <= OUTBOUND_QUEUE_MAX:
        raise ConfigurationError(
            f"--outbound-queue takes a whole number of frames from 1 to {OUTBOUND_QUEUE_MAX}, "
            f"not {args.outbound_queue!r}"
        )
    return PlatformPolicy(outbound_queue=size)


def _run(args: argparse.Namespace) -> int:
    policy = _policy(args)
    collect_rarely(policy.collector_threshold)
    try:
        trio.run(_serve, args, policy)
    finally:
        freeze_for_exit()
    return 0


async def _serve(args: argparse.Namespace, policy: PlatformPolicy) -> None:
    from ..platform import run_platform  # here: `band-trio agent` need not load hypercorn

    # Signals are taken from before the start on: a SIGTERM sent the moment the ready
    # line appears must shut down cleanly, not kill the process with the default action.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            platform = await nursery.start(
                functools.partial(
                    run_platform,
                    host=args.host,
                    port=args.port,
                    db=str(args.db) if args.db else None,
                    seed=args.seed,
                    ready_file=str(args.ready_file) if args.ready_file else None,
                    console=args.console,
                    policy=policy,
                )
            )
            _announce(platform.info)
            async for signum in signals:
                print(
                    f"band-trio platform: {signal.Signals(signum).name}, shutting down",
                    file=sys.stderr,
                    flush=True,
                )
                break
            nursery.cancel_scope.cancel(reason="signal")


def _announce(info: ReadyInfo) -> None:
    print(
        f"band-trio platform listening: rest {info.rest_url}  ws {info.ws_url}  "
        f"admin {info.admin_url}",
        flush=True,
    )
    if info.console_url:
        print(f"console {info.console_url}", flush=True)
    if info.agent_id:
        print(
            f"seeded agent {info.agent_id} key {info.api_key} room {info.room_id} "
            f"user {info.user_id}",
            flush=True,
        )
