"""The platform's side of taken guidance: its claim when taken, its marks with the turn.

Each taken message is settled as the turn's message was (`_settle.settle`, the
same outcome and abort kind, the turn's failure label), after it: a success or
an interrupt marks it `processed`, a failure `failed`, a stop leaves it
`processing` for the replay (docs/discussion/questions.md, "Guidance").
"""

from __future__ import annotations

import trio

from .. import errors
from ..contract import Message
from ._context import RoomContext
from ._ledger import Ledger
from ._settle import Outcome, settle
from ._turn_state import ActiveTurn

__all__ = ["claim_guidance", "left_taken", "settle_taken"]


async def claim_guidance(ctx: RoomContext, ledger: Ledger, message: Message) -> bool | None:
    """Claim a message the turn took: True once ours, False if answered stopped, None
    if it failed (its mark claims first then)."""
    ledger.charge(message.id)
    try:
        return await ctx.rest.claim(message.room_id, message.id) is not None
    except errors.PlatformError:  # a 409 too: the settling's mark claims first
        return None


async def settle_taken(
    ctx: RoomContext, ledger: Ledger, turn: ActiveTurn, outcome: Outcome
) -> None:
    """Settle each message the turn took, in order, as the turn was settled."""
    assert turn.guidance is not None
    for taken in turn.guidance.taken:
        with trio.move_on_after(ctx.policy.cleanup_grace, shield=True):
            await taken.settled.wait()  # a claim in flight runs to its answer first
        one = ActiveTurn(taken.message, ctx.policy, cutoff=ctx.cutoff, threads=ctx.threads)
        one.claimed = bool(taken.claimed)
        one.abort_kind = turn.abort_kind
        one.failure = turn.failure
        await settle(ctx.rest, ctx.policy, ledger, one, outcome, explain=False)


def left_taken(ledger: Ledger, turn: ActiveTurn) -> None:
    """The turn was cancelled from outside: what it took is left for the replay."""
    if turn.guidance is not None:
        for taken in turn.guidance.taken:
            ledger.refund(taken.message.id)
