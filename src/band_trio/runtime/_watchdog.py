"""The watchdog of an aborted turn: it reports a turn that outlives its cleanup grace."""

from __future__ import annotations

import logging

import trio

from ._context import RoomContext
from ._results import Overrun
from ._turn_state import ActiveTurn

__all__ = ["watch_abort"]

log = logging.getLogger("band_trio.runtime.room")


async def watch_abort(ctx: RoomContext, turn: ActiveTurn, watch: trio.CancelScope) -> None:
    """Report a turn that outlives its cleanup grace after being aborted.

    Started with the turn, parked until the turn's scope exits (`watch` is
    cancelled if the turn ends without an abort). The abort does not wake it: it
    only sets the park's deadline (`ActiveTurn.grace`), so the cancel reaches the
    adapter with no other task woken beside it. A claim still in flight when the
    grace runs out, or remote starts and stops still under way (each bounded by
    its own grace), are waited for, and then the turn gets one more grace."""
    with watch, turn.grace:
        await turn.done.wait()
    if not turn.grace.cancelled_caught or watch.cancelled_caught:
        return
    grace = ctx.policy.cleanup_grace
    if not turn.claim_settled.is_set() or turn.control.busy:
        await turn.claim_settled.wait()  # a claim in flight runs to its answer first
        if await turn.wait_settled(grace):
            return
    kind = turn.abort_kind.value if turn.abort_kind is not None else "cancel"
    log.error(
        "room %s: the turn for %s ignored its %s for more than %.1fs",
        turn.message.room_id,
        turn.message.id,
        kind,
        grace,
    )
    ctx.journal.overran.append(
        Overrun(turn.message.room_id, turn.message.id, f"ignored the {kind}")
    )
