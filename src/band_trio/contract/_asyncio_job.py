"""One `run_asyncio` call as its owner's loop and the turn see it: `AsyncioJob`, and the
counts the loop keeps of its jobs (`AsyncioStats`, `Overran`).

Its fields are the trio thread's; the asyncio task itself is touched only in the loop's
thread (`AsyncioLoop`), which hands each change back through the trio token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import outcome
import trio

if TYPE_CHECKING:
    from ._asyncio_loop import AsyncioLoop

__all__ = ["AsyncioJob", "AsyncioStats", "Overran"]


@dataclass(frozen=True, slots=True)
class AsyncioStats:
    """The asyncio tasks of one owner's turns (`run_asyncio`)."""

    running: int
    """Tasks a turn waits for, or that outlived their turn's cancel, running now."""
    overran: int
    """Tasks that ignored their turn's cancel past the stop grace, over the owner's life."""
    overran_running: int
    """Of those, the ones still running: cancelled again, and waited for, at close."""


@dataclass(frozen=True, slots=True)
class Overran:
    """An asyncio task that ignored its turn's cancel past the stop grace."""

    room_id: str
    message_id: str
    label: str
    """The async function's qualified name."""


class AsyncioJob:
    """One `run_asyncio` call: its asyncio task and, once it ended, its outcome.

    Its fields are the trio thread's; the task itself is touched only in the loop's."""

    __slots__ = (
        "_done", "_entered", "_loop", "_overran", "_settled", "_token", "cancel_requested",
        "label", "message_id", "result", "room_id",
    )  # fmt: skip

    def __init__(self, loop: AsyncioLoop, label: str, room_id: str, message_id: str) -> None:
        self._loop = loop
        self._token = trio.lowlevel.current_trio_token()
        self._entered = trio.Event()
        self._done = trio.Event()
        self._settled = trio.Event()
        self._overran = False
        self.label = label
        self.room_id = room_id
        self.message_id = message_id
        self.cancel_requested = False
        """Whether the trio side cancelled the task (a turn's abort, the owner's close)."""
        self.result: outcome.Outcome[Any] | None = None

    def is_done(self) -> bool:
        return self._done.is_set()

    async def wait(self) -> None:
        """Return once the task ended; the caller sets the deadline."""
        await self._done.wait()

    async def wait_entered(self) -> None:
        """Return once the async function's code runs (its first step began), or the call
        ended without it: from then on a cancel reaches code of its own (its `try`)."""
        await self._entered.wait()

    def is_settled(self) -> bool:
        return self._settled.is_set()

    async def wait_settled(self) -> None:
        """After `cancel`: return once the task and every task started in its context
        (a framework's own, a shielded one) ended; the caller sets the deadline."""
        await self._settled.wait()

    def cancel(self) -> None:
        """Cancel the task (in the loop's thread, after it was started); the tasks it
        started are cancelled by asyncio as the task stops awaiting them, or not at all
        where it shielded them: `wait_settled` waits for those too."""
        if self.cancel_requested:
            return
        self.cancel_requested = True  # its task may have ended: the tasks it started not
        self._loop._call(self._loop._cancel_task, self)

    def overran(self) -> None:
        """The task (or one it started) ignored its cancel past the stop grace: counted
        until they all ended."""
        if self._overran or self.is_settled():
            return
        self._overran = True
        self._loop._overran(self)

    def _ended(self, result: outcome.Outcome[Any]) -> None:  # the trio thread
        self.result = result
        self._entered.set()
        self._done.set()
        self._loop._jobs.discard(self)

    def _settled_now(self) -> None:  # the trio thread
        self._settled.set()
        self._loop._job_settled(self)
