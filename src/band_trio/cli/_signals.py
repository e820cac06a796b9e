"""The signals of a long-running command: the first stops it gracefully, a second at once.

    async for ... in signals:          first SIGINT/SIGTERM: `graceful()`, in a task
    async for ... in signals:          second: `hard()` — every running turn or
                                       forward aborted, every shielded wait cut to
                                       `Policy.hard_stop_grace`: the work ends by itself
    after `Policy.hard_stop_deadline`  still running (an adapter that ignores the
                                       cancel): exit 1 naming it, without it

So the second signal ends `agent`, `bridge` and `host` within about a second,
whatever a peer or an adapter does. `runs-api` has its own (its first signal
already stops every run).

The first signal also puts the heap out of the collector's sight
(`_collector.freeze_for_exit`): the process is on its way out, and what it
holds then lives until the exit, so a full collection during the stop need not
walk it again. Tearing down 10,000 idle rooms makes garbage of its own, and each
full collection it set off walked every room's objects: ~40 % of the teardown's
CPU (docs/benchmarks.md, the scale rows). Garbage made from then on is still
collected.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

from ..policy import Policy
from ._collector import freeze_for_exit
from ._exits import EXIT_CRASH, exit_at_once

__all__ = ["serve_until_signalled"]

T = TypeVar("T")


async def serve_until_signalled(
    command: str,
    work: Callable[[], Awaitable[T]],
    *,
    graceful: Callable[[], Awaitable[object]],
    hard: Callable[[], object],
    policy: Policy,
    still_running: Callable[[], str],
) -> T:
    """`await work()` under the signals, and its result."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            actions = _Actions(command, graceful, hard, policy, still_running)
            nursery.start_soon(_on_signals, signals, actions)
            result = await work()
            nursery.cancel_scope.cancel(reason=f"band-trio {command} ended")  # the backstop too
    return result


@dataclass(frozen=True, slots=True)
class _Actions:
    command: str
    graceful: Callable[[], Awaitable[object]]
    hard: Callable[[], object]
    policy: Policy
    still_running: Callable[[], str]


async def _on_signals(signals: Any, actions: _Actions) -> None:
    command = actions.command
    async for signum in signals:
        print(
            f"band-trio {command}: {signal.Signals(signum).name}: stopping (again to force)",
            file=sys.stderr,
            flush=True,
        )
        break
    else:
        return
    freeze_for_exit()  # the heap as it is now lives until the exit: no collection walks it
    async with trio.open_nursery() as nursery:
        nursery.start_soon(actions.graceful)
        async for signum in signals:
            print(
                f"band-trio {command}: {signal.Signals(signum).name} again: stopping at once",
                file=sys.stderr,
                flush=True,
            )
            break
        else:
            return
        policy = actions.policy
        actions.hard()  # every unit aborted, every shielded wait cut: the work ends by itself
        await trio.sleep(policy.hard_stop_deadline)  # cancelled as soon as the work has ended
        left = actions.still_running() or "unknown work"
        print(
            f"band-trio {command}: still running {policy.hard_stop_deadline:g}s after the "
            f"second signal ({left}); exiting without it",
            file=sys.stderr,
            flush=True,
        )
        exit_at_once(EXIT_CRASH)
