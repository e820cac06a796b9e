"""`band-trio bridge --config FILE`: forward N agent identities' events to their targets.

Exit statuses: 0 when stopped by a signal; 3 when every identity was ended by
the platform (terminal disconnects, refused keys; each reason is logged as it
happens); 1 when every identity ended and some only because the platform could
not be reached at start-up; 2 for a bad config file (one line). The first
SIGINT/SIGTERM stops gracefully (forwards in flight get
`BridgePolicy.shutdown_grace`), a second at once (`Bridge.hard_stop`; the process
exits 1 after `Policy.hard_stop_deadline` whatever still runs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..policy import Policy
from ._agent import upstream_policy
from ._collector import collect_rarely, freeze_for_exit
from ._exits import EXIT_CRASH, EXIT_DISCONNECTED, EXIT_OK
from ._observe import add_flags as add_observe_flags
from ._observe import observing
from ._signals import serve_until_signalled

if TYPE_CHECKING:
    from ..bridge import Bridge, BridgeResult

__all__ = ["add_parser"]


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "bridge", help="forward agent identities' room events to remote agents (HTTP, A2A, command)"
    )
    parser.add_argument("--config", type=Path, required=True, help="the bridge's TOML or JSON file")
    add_observe_flags(parser)
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from ..bridge import Bridge, load_config  # loaded only for this command

    seen = observing(args, "bridge")
    policy = Policy(upstream=upstream_policy())  # BAND_UPSTREAM_*: the targets' retries
    bridge = Bridge(load_config(args.config), policy=policy)
    collect_rarely(bridge.bridge_policy.collector_threshold)
    try:
        result = trio.run(seen.wrap(_serve), bridge)
    finally:
        freeze_for_exit()
    if result.all_lost:
        print(
            f"band-trio bridge: every identity ended for good ({', '.join(result.lost)})",
            file=sys.stderr,
        )
        return EXIT_DISCONNECTED if result.all_refused else EXIT_CRASH
    print(f"band-trio bridge: stopped: {_stopped(bridge)}", file=sys.stderr, flush=True)
    return EXIT_OK


def _stopped(bridge: Bridge) -> str:
    """How the stop went, in one line: identities closed, and what the shutdown cut."""
    identities = bridge.identities.values()
    closed = sum(1 for i in identities if i.ended == "closed")
    said = [f"{closed} of {len(bridge.identities)} identities closed"]
    cancelled = sum(len(i.journal.cancelled) for i in identities)
    if cancelled:
        said.append(f"{cancelled} forward(s) cancelled after the shutdown grace (left processing)")
    overran = sum(len(i.journal.overran) for i in identities)
    if overran:
        said.append(f"{overran} cleanup(s) overran their grace")
    return ", ".join(said)


async def _serve(bridge: Bridge) -> BridgeResult:
    """Run `bridge` until it ends: every identity closed (a signal) or gone for good."""

    async def work() -> BridgeResult:
        ended: list[BridgeResult] = []
        async with trio.open_nursery() as nursery:

            async def run(*, task_status: trio.TaskStatus[None]) -> None:
                ended.append(await bridge.run(task_status=task_status))
                nursery.cancel_scope.cancel(reason="the bridge ended")

            await nursery.start(run)
            nursery.start_soon(_say_ready, bridge)
        return ended[0]

    async def graceful() -> None:
        bridge.close()

    def running() -> str:
        busy = [s.name for s in bridge.statuses() if s.forwards_in_flight]
        return "forwards of " + ", ".join(busy) if busy else ""

    return await serve_until_signalled(
        "bridge",
        work,
        graceful=graceful,
        hard=lambda: bridge.hard_stop("a second signal"),
        policy=bridge.policy,
        still_running=running,
    )


async def _say_ready(bridge: Bridge) -> None:
    """One line once every identity has connected, ended, or failed a first attempt
    (an identity that cannot connect goes on retrying, but holds the line back no
    longer than its first attempt): for scripts and people."""
    identities = list(bridge.identities.values())
    waiting = iter(identities)
    pending = next(waiting, None)

    def settled() -> bool:  # each identity checked until it settles, not all every time
        nonlocal pending
        while pending is not None and pending.settled:
            pending = next(waiting, None)
        return pending is None

    await bridge.wait_until(settled)
    where = bridge.config.health
    health = f", health on http://{where[0]}:{bridge.health_port}/health" if where else ""
    connected = sum(1 for i in identities if i.connected)
    print(
        f"band-trio bridge: ready: {connected} of {len(identities)} identities connected{health}",
        file=sys.stderr,
        flush=True,
    )
