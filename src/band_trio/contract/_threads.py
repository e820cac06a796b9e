"""Blocking code in a thread: abandoned on cancel, its late result discarded.

A thread cannot be cancelled. `run_in_thread` runs blocking code with
`abandon_on_cancel=True`: an interrupt or stop returns control to the turn at
once, the thread runs on until its call returns, and what it returns is thrown
away. This is best-effort, and the turn's remote stop says so (`unconfirmed`)
unless the caller gives an `unblock` function that makes the blocking call
return early (closing the socket or stream it reads, for instance), which is
then run — in a thread too, under the stop grace — and reported `requested`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import trio

from ..observe import _hooks as observe
from ._remote import StopAnswer, StopOutcome
from ._turn import Turn

__all__ = ["run_in_thread"]

T = TypeVar("T")


async def run_in_thread(
    turn: Turn,
    fn: Callable[..., T],
    *args: object,
    unblock: Callable[[], object] | None = None,
    name: str = "thread",
) -> T:
    """`fn(*args)` in a worker thread, owned by `turn`; abandoned if the turn is aborted."""

    async def stop(_: str) -> StopAnswer:
        if unblock is None:
            return StopOutcome.UNCONFIRMED, "abandoned: a thread cannot be stopped"
        await trio.to_thread.run_sync(unblock, abandon_on_cancel=True)
        return StopOutcome.REQUESTED, "unblocked; the thread's late result is discarded"

    watch = observe.ThreadWatch()  # counts the thread while it outlives its turn
    async with turn.remote(stop=stop, name=name) as work:
        work.started(getattr(fn, "__qualname__", repr(fn)))
        try:
            result = await trio.to_thread.run_sync(watch.wrap(fn), *args, abandon_on_cancel=True)
        except trio.Cancelled:
            watch.abandoned()
            raise
        work.finished()
    return result
