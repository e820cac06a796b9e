"""One turn, as one unit of work: claim → adapter → settle.

    run_turn
    └── turn.scope                  opened before the claim; interrupt/stop cancel it
        ├── claim                   POST /processing (the durable claim)
        └── nursery
            ├── adapter.on_turn     the reasoning cycle
            └── keep-alive          working: true, every keep-alive period
    settle                          shielded and bounded (see `_settle`)

The unit is indivisible from the outside: a graceful stop waits for it to
end, and once the adapter has finished, its mark is sent even if the room is
cancelled meanwhile (shielded, under `settle_grace`). A cancel from outside
before the adapter finished — the room left, the shutdown grace over — is not
an interrupt: nothing is marked, the attempt is given back, and the message
stays `processing` for a later replay.
"""

from __future__ import annotations

import logging

import trio

from .. import errors
from ..contract import Turn
from ._context import RoomContext
from ._ledger import Ledger
from ._port import PlatformPort
from ._settle import Outcome, report_idle, settle
from ._turn_state import AbortKind, ActiveTurn

__all__ = ["run_turn"]

log = logging.getLogger("band_trio.runtime.turn")


async def run_turn(ctx: RoomContext, ledger: Ledger, turn: ActiveTurn) -> bool:
    """Claim, run and settle `turn`; True if its message's platform state moved on."""
    message = turn.message
    ledger.charge(message.id)
    outcome = Outcome.ABORTED
    try:
        with turn.scope:
            outcome = await _claim_and_run(ctx, turn)
    except BaseException:
        # Cancelled from outside the turn (the room left, the shutdown grace over).
        turn.done.set()
        if turn.finished and turn.abort_kind is None:
            # ...but the adapter was already done: settle it anyway, or a restart
            # would answer the message a second time
            done = Outcome.SUCCEEDED if turn.failure is None else Outcome.FAILED
            await settle(ctx.rest, ctx.policy, ledger, turn, done)
        else:
            ledger.refund(message.id)
            if turn.working:
                with trio.move_on_after(ctx.policy.cleanup_grace, shield=True):
                    await report_idle(ctx.rest, message.room_id)
        raise
    turn.done.set()
    if turn.abort_kind is not None:
        outcome = Outcome.ABORTED  # even if the adapter swallowed the cancellation
    return await settle(ctx.rest, ctx.policy, ledger, turn, outcome)


async def _claim_and_run(ctx: RoomContext, turn: ActiveTurn) -> Outcome:
    message = turn.message
    try:
        claim = await ctx.rest.claim(message.room_id, message.id)
    except errors.PlatformError as exc:
        turn.claimed = False
        log.warning("room %s: claim of %s failed: %s", message.room_id, message.id, exc)
        return Outcome.NOT_CLAIMED
    turn.claimed = claim is not None
    if claim is None:
        return Outcome.CLAIM_STOPPED
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_keep_working, ctx, turn)
        try:
            await ctx.adapter.on_turn(Turn(message, PlatformPort(ctx.rest, turn)))
            turn.finished = True  # no checkpoint since the return: the work is done
        except Exception as exc:
            turn.finished = True
            turn.failure = f"{type(exc).__name__}: {exc}"[:200]
            log.warning(
                "room %s: adapter failed on %s: %s",
                message.room_id,
                message.id,
                turn.failure,
                exc_info=exc,
            )
            return Outcome.FAILED
        finally:
            nursery.cancel_scope.cancel()
    return Outcome.SUCCEEDED


async def _keep_working(ctx: RoomContext, turn: ActiveTurn) -> None:
    """`working: true` now and every keep-alive period; a `false` answer is a platform stop."""
    room_id = turn.message.room_id
    while True:
        turn.working = True
        try:
            working = await ctx.rest.report_activity(room_id, True)
        except errors.PlatformError as exc:
            log.debug("room %s: activity report failed: %s", room_id, exc)
        else:
            if not working:
                turn.abort(AbortKind.PLATFORM_STOP, "the platform reports the room stopped")
                return
        await trio.sleep(ctx.policy.working_keep_alive)
