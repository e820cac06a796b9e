"""asyncio code as part of a turn: `run_asyncio(async_fn, *args)`.

The door through which asyncio frameworks (LangGraph, the OpenAI Agents SDK)
enter a turn. The coroutine runs as a task on its owner's asyncio loop (one per
owner, in a thread: `AsyncioLoop`), registered as the turn's remote work, so the
rules of remote work hold for it:

* an interrupt, a stop, the turn's deadline or the owner's shutdown cancels the
  task — and with it every task it awaits, a framework's own included, as asyncio
  cancels what a cancelled task waits on — and the turn waits for it to end;
* that wait is bounded by `Policy.backend_stop_grace`: a task that ignores its
  cancel past it is reported as an `unconfirmed` remote stop (the turn's
  `remote_stops`, the agent's, the log, `band_trio_asyncio_overruns_total`), the
  turn goes on, and the task is cancelled again and waited for (bounded) when
  the loop's owner closes it: never silently abandoned;
* what the task raises is raised here, the turn's failure like any adapter
  error; a `CancelledError` that does not come from the turn's abort becomes
  `AsyncioCancelledError`, a failure, never taken for the abort;
* the turn's context variables (trace context, correlation id, the current
  turn) are copied to the task, so an asyncio framework's spans nest under the
  turn's. The task must not touch trio objects (the `Turn` among them): it runs
  in another thread. Post from the trio side, with what the call returns.

anyio code (the `openai` and `anthropic` SDKs, the MCP SDK) needs none of this:
it runs under trio as it is, and the turn's cancel is its cancel.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import outcome
import trio

from ..errors import AsyncioCancelledError
from ._asyncio_job import AsyncioJob
from ._current import current_turn
from ._cutoff import Cutoff
from ._remote import StopAnswer, StopOutcome

__all__ = ["ASYNCIO_WORK", "run_asyncio"]

T = TypeVar("T")

ASYNCIO_WORK = "asyncio task"
"""The name `run_asyncio` registers its remote work under: each `RemoteStop` of an
asyncio task has it (what the conformance kit looks for)."""

_SAY_WHY = 0.001
"""How long before the stop's deadline its wait ends, so the stop says what happened
rather than the generic "no answer"."""


async def run_asyncio(async_fn: Callable[..., Awaitable[T]], *args: object) -> T:
    """Run `await async_fn(*args)` on the turn's asyncio loop and return its result.

    Called from trio code of a turn (an adapter's `on_turn`, or a task it started);
    `NoTurnError` elsewhere. An abort of the turn cancels the asyncio task and waits
    for it (`Policy.backend_stop_grace` at most), then raises `trio.Cancelled` as
    any other await of the turn would."""
    turn = current_turn()
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        raise RuntimeError(
            "run_asyncio is awaited from the turn's trio code, not from asyncio code"
        ) from None
    label = getattr(async_fn, "__qualname__", None) or repr(async_fn)
    loop = turn._control.threads.asyncio
    where = (turn.room_id, turn.message.id)
    job = loop.submit(async_fn, args, contextvars.copy_context(), label, where)
    async with turn.remote(stop=_stopper(turn._control.cutoff), name=ASYNCIO_WORK) as work:
        work.started(job, label=label)
        await job.wait()
        work.finished()
    return cast(T, _unwrap(job))


def _stopper(cutoff: Cutoff) -> Callable[[AsyncioJob], Awaitable[StopAnswer]]:
    async def stop(job: AsyncioJob) -> StopAnswer:
        """Cancel the task and wait for it to end, within the stop's deadline."""
        if job.is_done():
            return StopOutcome.CONFIRMED, "the asyncio task had ended"
        waited_from = trio.current_time()
        # Shielded, and a moment before the stop's own deadline (a hard stop's cutoff
        # still ends it): the wait ends here, so the stop says why, not "no answer".
        with cutoff.shielded(trio.current_effective_deadline() - _SAY_WHY):
            try:  # the cancel goes in once the code runs: it reaches the code's own `try`
                await job.wait_entered()
            finally:
                job.cancel()
            await job.wait_settled()
        if job.is_settled():
            return StopOutcome.CONFIRMED, "the asyncio task ended after its cancel"
        job.overran()
        waited = trio.current_time() - waited_from
        if job.is_done():  # its own task ended; one it started did not
            return StopOutcome.UNCONFIRMED, (
                f"a task the asyncio task started still runs {waited:.1f}s after the cancel "
                "(shielded from it, or ignoring it); it is cancelled again and waited for "
                "when its loop closes"
            )
        return StopOutcome.UNCONFIRMED, (
            f"the asyncio task ignored its cancel for {waited:.1f}s; it is cancelled again "
            "and waited for when its loop closes"
        )

    return stop


def _unwrap(job: AsyncioJob) -> Any:
    result = job.result
    assert result is not None  # the job is done
    if isinstance(result, outcome.Error) and isinstance(result.error, asyncio.CancelledError):
        why = "its loop was closed" if job.cancel_requested else "not by its turn"
        raise AsyncioCancelledError(
            f"the asyncio task {job.label} was cancelled ({why}): {result.error}"
        ) from result.error
    return result.unwrap()
