"""The watchdog of an aborted turn: it reports a turn that outlives its cleanup grace."""

from __future__ import annotations

import logging

from ._context import RoomContext
from ._results import Overrun
from ._turn_state import ActiveTurn

__all__ = ["overran"]

log = logging.getLogger("band_trio.runtime.room")


async def overran(ctx: RoomContext, turn: ActiveTurn) -> None:
    """The aborted turn's scope is still open one cleanup grace after the abort
    (`ActiveTurn.grace`): report it, unless it is only waiting for what is bounded on
    its own. Run by the one task beside the turn's scope (`_turn._KeepAlive`), which is
    cancelled the moment the scope exits: an abort wakes nothing but the adapter, and
    a turn that unwinds in time costs no task of its own to watch it.

    A claim still in flight when the grace runs out, or remote starts and stops still
    under way (each bounded by its own grace), are waited for, and then the turn gets
    one more grace."""
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
