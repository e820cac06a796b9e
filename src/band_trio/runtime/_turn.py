"""One turn, as one unit of work: claim → adapter → settle.

    run_turn                        the turn is abortable from here on (`Room.turn`)
    └── nursery                     the unit's own
        ├── claim                   POST /processing; a signal now cancels the scope
        │                           before it is entered, never the request itself
        ├── turn.scope              interrupt/stop cancel it
        │   └── adapter.on_turn     the reasoning cycle
        ├── keep-alive (a task)     working: true, every keep-alive period, beside the
        │                           scope (a signal wakes the adapter alone); quiet once
        │                           the scope exits (ended at once only mid-report), and
        │                           ended after the mark, before `working: false`. It is
        │                           the abort's watchdog too: a turn still in its scope
        │                           one cleanup grace after an abort is reported there
        └── settle                  shielded and bounded (see `_settle`)

The unit is indivisible from the outside: a graceful stop waits for it to
end, and once the adapter has finished, its mark is sent even if the room is
cancelled meanwhile (shielded, under `settle_grace`). A cancel from outside
before the adapter finished — the room left, the shutdown grace over — is not
an interrupt: nothing is marked, the attempt is given back, and the message
stays `processing` for a later replay.
"""

from __future__ import annotations

import logging
import math
from functools import partial

import trio

from .. import errors
from ..contract import LastAbort, Turn, adapter_failure, turn_context
from ..observe import hooks as observe
from ._context import RoomContext
from ._guidance_settle import claim_guidance, left_taken, settle_taken
from ._inbound import MESSAGE
from ._ledger import Ledger
from ._port import PlatformPort
from ._settle import Outcome, report_idle, settle
from ._turn_state import AbortKind, ActiveTurn
from ._watchdog import overran

__all__ = ["run_turn"]

log = logging.getLogger("band_trio.runtime.turn")


async def run_turn(
    ctx: RoomContext, ledger: Ledger, turn: ActiveTurn, last_abort: LastAbort | None
) -> bool:
    """Claim, run and settle `turn`; True if its message's platform state moved on.

    Watched as one unit (`observe.Work`): its span, outcome, duration, and the
    latency of an abort, read from the turn's control."""
    message = turn.message
    attributes = {"band.agent.id": ctx.agent_id, "band.sender.type": message.sender_type}
    where = {"room_id": message.room_id, "message_id": message.id}
    work = ctx.rules.work
    with observe.Work(work, turn.control, **where, attributes=attributes, log=log) as watch:
        try:
            return await _turn(ctx, ledger, turn, last_abort)
        finally:
            outcome, watch.failure = _seen(turn)
            watch.outcome = _FORWARD_OUTCOME.get(outcome, outcome) if work == "forward" else outcome


_FORWARD_OUTCOME = {
    Outcome.SUCCEEDED.value: "delivered",
    Outcome.NOT_CLAIMED.value: "failed",
    Outcome.ABORTED.value: "cancelled",
    Outcome.CLAIM_STOPPED.value: "cancelled",
    Outcome.CONSUMED.value: "cancelled",
}
"""A bridge's forward as its metrics and spans name it (docs/reference/observability.md)."""


def _seen(turn: ActiveTurn) -> tuple[str, str | None]:
    """How the turn ended, as observed: its settled outcome, else (cancelled from
    outside) what its adapter got to."""
    if turn.outcome is not None:
        outcome = turn.outcome
    elif turn.finished and turn.abort_kind is None:
        outcome = Outcome.SUCCEEDED if turn.failure is None else Outcome.FAILED
    else:
        outcome = Outcome.ABORTED
    return outcome.value, turn.failure if outcome is Outcome.FAILED else None


async def _turn(
    ctx: RoomContext, ledger: Ledger, turn: ActiveTurn, last_abort: LastAbort | None
) -> bool:
    # The keep-alive's nursery holds the whole unit: once the turn's scope has exited,
    # the keep-alive is quiet, and ended once the mark is answered (before `working:
    # false`), so its wake and exit come after the mark, not in the round before it.
    async with trio.open_nursery() as beside:
        try:
            return await _unit(ctx, ledger, turn, last_abort, beside)
        finally:  # unless settling ended it (before its `working: false`)
            await turn.end_beside()


async def _unit(
    ctx: RoomContext,
    ledger: Ledger,
    turn: ActiveTurn,
    last_abort: LastAbort | None,
    beside: trio.Nursery,
) -> bool:
    message = turn.message
    if turn.event == MESSAGE:
        ledger.charge(message.id)
    outcome = Outcome.ABORTED
    try:
        claimed: Outcome | None = None
        if turn.settles:
            with observe.step("band_trio.claim") as claim:
                claimed = await _claim(ctx, turn)
                claim.set("band.claim.outcome", "claimed" if claimed is None else claimed.value)
        else:  # an event, or a far end that claims itself: nothing to wait for
            turn.claimed = False
            turn.claim_answered()
        try:
            # The activity keep-alive runs beside the turn's scope, not in it: a signal
            # then wakes only the adapter, and the keep-alive is quieted right after. It
            # watches the abort too (a unit the runtime does not settle reports nothing,
            # but is watched all the same); a turn aborted in its claim window never
            # enters its scope, and needs no watching.
            keep_alive = _KeepAlive(ctx, turn, reports=turn.settles)
            if claimed is None and not turn.scope.cancel_called:
                beside.start_soon(keep_alive.run)
                if turn.guidance is not None and turn.settles:  # claimed beside the turn
                    turn.guidance.start(beside, partial(claim_guidance, ctx, ledger))
            try:
                with turn.scope:  # cancelled already if a signal came during the claim
                    outcome = (
                        claimed
                        if claimed is not None
                        else await _run(ctx, ledger, turn, last_abort)
                    )
            finally:
                observe.scope_exited()  # an abort's latency ends here
                if turn.desk is not None:  # its questions take no more answers
                    turn.desk.turn_ended()
                if keep_alive.sending:  # a report on the wire: done with before the mark
                    await keep_alive.end()
                else:  # parked: quiet now (no report starts, the abort is watched no
                    # more), ended once the mark is answered, so its cancel and its wake
                    # come after the mark, not in the round before it
                    keep_alive.quiet()
                    turn.beside_end = keep_alive.end
        finally:
            ctx.stops.add(turn.control.stops)  # each one settled inside the scope
        if turn.scope.cancelled_caught and turn.abort_kind is None and not turn.finished:
            # nobody aborted it: the turn's own deadline
            turn.failure = f"the turn ran past its {ctx.policy.turn_deadline:g}s deadline"
            log.warning("room %s: %s: %s", message.room_id, message.id, turn.failure)
            outcome = Outcome.FAILED
    except BaseException:
        # Cancelled from outside the turn (the room left, the shutdown grace over).
        turn.done.set()
        if turn.finished and turn.abort_kind is None:
            # ...but the adapter was already done: settle it anyway, or a restart
            # would answer the message a second time
            done = Outcome.SUCCEEDED if turn.failure is None else Outcome.FAILED
            await settle(ctx.rest, ctx.policy, ledger, turn, done)
        else:
            if turn.event == MESSAGE:
                ledger.refund(message.id)
            left_taken(ledger, turn)
            with turn.control.cutoff.shield(ctx.policy.cleanup_grace):
                await turn.end_beside()
                if turn.working:
                    await report_idle(ctx.rest, message.room_id)
        raise
    turn.done.set()
    if turn.abort_kind is not None and outcome is not Outcome.CONSUMED:
        outcome = Outcome.ABORTED  # even if the adapter swallowed the cancellation
    turn.outcome = outcome
    moved = await settle(ctx.rest, ctx.policy, ledger, turn, outcome)
    if turn.guidance is not None and turn.guidance.taken:
        await settle_taken(ctx, ledger, turn, outcome)
    return moved


async def _claim(ctx: RoomContext, turn: ActiveTurn) -> Outcome | None:
    """Claim the message: None once it is ours, else why the adapter will not run.

    The claim runs outside the turn's scope. A signal that lands while it is in
    flight (the claim window) still aborts the turn — it cancels the scope before
    the scope is entered, so the adapter is never called — but it cannot cut the
    request off: its outcome is always known, so consuming an interrupted message
    never needs a second claim (unless this one opened no attempt: answered 204, or
    failed), and no late claim can reopen it.
    """
    message = turn.message
    try:
        claim = await ctx.rest.claim(message.room_id, message.id)
    except errors.ConflictError as exc:
        turn.claimed = False
        if exc.code == "already_processed":  # a platform stricter than its docs says
            # it was consumed meanwhile (the documented one re-opens it instead)
            return Outcome.CONSUMED
        log.warning("room %s: claim of %s refused: %s", message.room_id, message.id, exc)
        return Outcome.NOT_CLAIMED
    except errors.PlatformError as exc:
        turn.claimed = False
        log.warning("room %s: claim of %s failed: %s", message.room_id, message.id, exc)
        return Outcome.NOT_CLAIMED
    finally:
        turn.claim_answered()
    turn.claimed = claim is not None
    return None if claim is not None else Outcome.CLAIM_STOPPED


async def _run(
    ctx: RoomContext, ledger: Ledger, turn: ActiveTurn, last_abort: LastAbort | None
) -> Outcome:
    """The adapter, under the turn's deadline."""
    message = turn.message
    await trio.lowlevel.checkpoint()  # a signal during the claim cancels the turn here
    deadline = trio.current_time() + ctx.policy.turn_deadline
    turn.scope.deadline = turn.control.deadline = deadline
    port = PlatformPort(
        ctx.rest, turn, ctx.agent_id, policy=ctx.policy, since=message.inserted_at,
        known=ledger.own_posts, desk=turn.desk, guidance=turn.guidance,
        sender_id=message.sender_id,
    )  # fmt: skip
    view = Turn(message, port, control=turn.control, last_abort=last_abort)
    try:
        with observe.adapter_call(ctx.agent_id, ctx.adapter), turn_context(view):
            if ctx.call is None:
                await ctx.adapter.on_turn(view)
            else:  # a bridged identity's forward
                await ctx.call(turn, view)
        turn.finished = True  # no checkpoint since the return: the work is done
    except BaseException as exc:  # SystemExit, an adapter's own KeyboardInterrupt: failures
        if not adapter_failure(exc):  # a cancel, or a real Ctrl-C: on up
            raise
        turn.finished = True
        turn.failure = f"{type(exc).__name__}: {exc}"[:200]
        if isinstance(exc, errors.UpstreamError):  # its message is written for the room
            turn.explained = " ".join(str(exc).split())[:500]
        if turn.abort_kind is not None:  # its abort ended it: how it unwound is no failure
            log.info("room %s: the aborted turn for %s ended with %s", *_where(turn), turn.failure)
        else:  # one line for the operator; the traceback (often a long chain) only at DEBUG
            log.warning("room %s: adapter failed on %s: %s", *_where(turn), turn.failure)
            log.debug("room %s: adapter failed on %s", *_where(turn), exc_info=exc)
        return Outcome.FAILED
    return Outcome.SUCCEEDED


class _KeepAlive:
    """`working: true` now and every keep-alive period, in a task beside the turn's scope;
    a `false` answer is a platform stop. The watchdog of the turn's abort as well: it
    parks in `ActiveTurn.grace`, whose deadline an abort sets one cleanup grace on, and
    reports the turn (`_watchdog.overran`) if the scope is still open then.

    Once the scope has exited, a report still on the wire is cancelled and waited for
    (`end`), so neither the mark nor `working: false` leaves before it is done with; a
    keep-alive parked between reports is only made quiet (`quiet`: no wake), and ended
    once the mark is answered, before `working: false` (`ActiveTurn.end_beside`): its
    cancel and its wake come after the mark, not in the round after an agent-wide
    interrupt, which a thousand rooms' marks wait out. No report starts once it is
    quiet. One task does both jobs: a second one per turn (the watchdog had its own)
    was a spawn per turn, and one more wake per room in that round."""

    __slots__ = ("_ctx", "_ended", "_nap", "_quiet", "_reports", "_scope", "_sending", "_turn")

    def __init__(self, ctx: RoomContext, turn: ActiveTurn, *, reports: bool = True) -> None:
        self._ctx = ctx
        self._turn = turn
        self._reports = reports
        """Whether it reports activity (a unit the runtime settles), or only watches."""
        self._scope = trio.CancelScope()
        self._sending = False
        self._quiet = False
        self._nap: trio.CancelScope | None = None
        """The wait between two reports (`quiet` puts its end off: no wake)."""
        self._ended = trio.Event()

    async def run(self) -> None:
        turn = self._turn
        try:
            with self._scope:
                with turn.grace:  # its deadline is an abort's: the turn's cleanup grace
                    if self._reports:
                        await self._report()
                    await trio.sleep_forever()
                if not self._quiet:  # the grace ran out with the turn's scope still open
                    await overran(self._ctx, turn)
        finally:
            self._ended.set()

    def quiet(self) -> None:
        """The turn's scope has exited: no report starts from now on, and the abort is
        watched no more (a later abort of the settling turn is no overrun). For a
        keep-alive parked between reports (`sending` false): it is not woken, and stays
        parked until `end`."""
        self._quiet = True
        self._turn.grace.deadline = math.inf
        if self._nap is not None:  # nor does the end of its wait wake it
            self._nap.deadline = math.inf

    @property
    def sending(self) -> bool:
        """A report of it is under way (on the wire, or waiting for a connection)."""
        return self._sending

    async def _report(self) -> None:
        """Report until ended, or until the platform answers that the room is stopped."""
        turn, room_id = self._turn, self._turn.message.room_id
        # woken by its sleep's end in the round that ended it, it must not report
        while not (self._scope.cancel_called or self._quiet):
            turn.working = True
            self._sending = True
            try:
                working = await self._ctx.rest.report_activity(room_id, True)
            except errors.PlatformError as exc:
                log.debug("room %s: activity report failed: %s", room_id, exc)
            else:
                if not working:
                    turn.abort(AbortKind.PLATFORM_STOP, "the platform reports the room stopped")
                    return  # and watch that abort
            finally:
                self._sending = False
            self._nap = trio.CancelScope(
                deadline=trio.current_time() + self._ctx.policy.working_keep_alive
            )
            with self._nap:
                await trio.sleep_forever()

    async def end(self) -> None:
        """Stop reporting (and watching); returns once no report of it is on the wire."""
        self._scope.cancel()
        if self._sending:
            with trio.CancelScope(shield=True):  # cancelled: it ends promptly
                await self._ended.wait()


def _where(turn: ActiveTurn) -> tuple[str, str]:
    return turn.message.room_id, turn.message.id
