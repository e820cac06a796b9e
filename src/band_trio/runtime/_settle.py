"""What happens to a message after its turn: the marks, by outcome.

| outcome        | attempt   | platform                                      |
|----------------|-----------|-----------------------------------------------|
| SUCCEEDED      | kept      | ack-pending, then `processed`                 |
| FAILED         | kept      | `failed` with a short label, an error event   |
| ABORTED        | given back| interrupt: `processed` (consumed); stop: none |
| NOT_CLAIMED    | given back| none: the claim did not land                  |
| CLAIM_STOPPED  | given back| none: the claim was answered 204 (stopped)    |
| CONSUMED       | -         | none: the claim found it `processed` already  |

Settling is the last part of a turn's one unit of work (claim → adapter →
settle), and it runs shielded: once the adapter has finished, neither a
graceful stop nor leaving the room may cut the mark off, or the message would
be answered twice. It is bounded instead: an aborted turn's settling by the
policy's `cleanup_grace`, a finished one's by its `settle_grace`, each counted
from the moment the mark has a REST connection (`Cutoff.queued`): after a mass
abort a thousand marks queue for the client's few connections, and a grace
counted from the queue cut off every mark the platform had not reached within
it, to be retried a grace later, pass after pass. The wait in the queue is
bounded by `mark_wait`, and all of it by the hard stop's cutoff. A mark that
does not land in time leaves the message ack-pending, so only the mark is
retried later. The mark goes first; `working: false` follows once the mark
is answered, beside the error event of a failed turn, else from the turn's own
task (a stop has no mark: its report is the first thing settling sends).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

import trio

from .. import errors
from ..contract import Message
from ..link import RestClient
from ..policy import Policy
from ._inbound import MESSAGE
from ._ledger import Ledger
from ._turn_state import ActiveTurn

__all__ = ["Outcome", "report_idle", "settle"]

_NO_LIVE_ATTEMPT = 422
"""A mark answered 422: the message has no live attempt (band-client-rest 0.0.51)."""

log = logging.getLogger("band_trio.runtime.settle")


class Outcome(enum.Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"
    NOT_CLAIMED = "not_claimed"
    CLAIM_STOPPED = "claim_stopped"
    CONSUMED = "consumed"
    """The claim was refused 409 `already_processed`: a platform stricter than its docs
    (band-client-rest 0.0.51 says a claim re-opens a processed message) found it done."""


async def report_idle(
    rest: RestClient, room_id: str, on_slot: Callable[[], None] | None = None
) -> None:
    """`working: false`, once; a failure only costs the platform's ~10 s TTL."""
    try:
        await rest.report_activity(room_id, False, on_slot=on_slot)
    except errors.PlatformError as exc:
        log.debug("room %s: activity report failed: %s", room_id, exc)


async def _final_mark(
    rest: RestClient,
    ledger: Ledger,
    turn: ActiveTurn,
    failure: str | None,
    on_slot: Callable[[], None],
) -> bool:
    """Record ack-pending first, then send the final mark: `processed`, or `failed`
    with `failure` as its label. True once the platform accepted it; otherwise the
    message stays ack-pending and only the mark is retried later.

    Once an attempt of ours was opened, the mark is never preceded by a claim, not
    even when it is retried: a claim could land after an earlier mark that did reach
    the platform, and re-open the message (a claim after `processed` opens a new
    attempt, band-client-rest 0.0.51). A mark answered 422 then finds no live
    attempt: an earlier mark (or another client) settled it already, so it is
    settled here too. Only a turn whose claim opened no attempt (answered 204, or
    failed) and that an interrupt consumes claims first: no mark of ours can have
    landed for it, so that claim re-opens nothing.

    `on_slot` is called once each of these requests has a connection (the settling's
    grace starts at the first)."""
    message = turn.message
    what = "processed" if failure is None else "failed"
    if turn.claimed is None:  # a retry: the ledger knows whether an attempt was opened
        turn.claimed = ledger.pending_claimed(message.id)
    ledger.ack_pending(message.id, failure, claimed=turn.claimed)
    try:
        if not turn.claimed:
            if await rest.claim(message.room_id, message.id, on_slot=on_slot) is None:
                return _stopped(message, what)
            turn.claimed = True
            ledger.ack_pending(message.id, failure)  # from now on: never claimed again
        if failure is None:
            result = await rest.mark_processed(message.room_id, message.id, on_slot=on_slot)
        else:
            result = await rest.mark_failed(message.room_id, message.id, failure, on_slot=on_slot)
    except errors.PlatformResponseError as exc:
        if exc.status != _NO_LIVE_ATTEMPT:
            return _not_landed(message, what, exc)
        log.info(
            "room %s: %s mark of %s found no live attempt: settled already", message.room_id,
            what, message.id,
        )  # fmt: skip
        _settled(ledger, message.id, failure)
        return True
    except errors.PlatformError as exc:
        return _not_landed(message, what, exc)
    if result is None:
        return _stopped(message, what)
    _settled(ledger, message.id, failure)
    return True


def _stopped(message: Message, what: str) -> bool:
    log.info(
        "room %s: %s mark of %s refused as stopped; it stays ack-pending",
        message.room_id,
        what,
        message.id,
    )
    return False


def _settled(ledger: Ledger, message_id: str, failure: str | None) -> None:
    if failure is None:
        ledger.complete(message_id)
    else:
        ledger.failed(message_id)


def _not_landed(message: Message, what: str, exc: errors.PlatformError) -> bool:
    log.warning(
        "room %s: %s mark of %s did not land (%s); it stays ack-pending",
        message.room_id,
        what,
        message.id,
        exc,
    )
    return False


async def _mark_processed(
    rest: RestClient, ledger: Ledger, turn: ActiveTurn, on_slot: Callable[[], None]
) -> bool:
    return await _final_mark(rest, ledger, turn, None, on_slot)


async def _error_event(rest: RestClient, turn: ActiveTurn, on_slot: Callable[[], None]) -> None:
    """After a `failed` mark: an error event to the room (best effort), saying why when
    the adapter's error says it in words (an `UpstreamError`), else pointing at the log
    (band-sdk's words: other errors may hold what a room should not read)."""
    message = turn.message
    label = turn.failure or "adapter error"
    content = "Internal error while processing message; see agent logs."
    if turn.explained is not None:  # an upstream's failure, in words (the log has more)
        content = f"Could not answer: {turn.explained.rstrip('.')}."
    try:
        await rest.post_event(
            message.room_id,
            content,
            "error",
            {"failure": {"provider": "band-trio", "code": None, "message": label, "detail": None}},
            on_slot=on_slot,
        )
    except errors.PlatformError as exc:
        log.info("room %s: error event for %s not posted: %s", message.room_id, message.id, exc)


def _settled_elsewhere(ledger: Ledger, turn: ActiveTurn, outcome: Outcome) -> bool:
    """A unit the runtime does not settle (an event, or a message whose far end claims
    and marks it: `RoomRules.claims`): only this process's ledger moves. A message the
    work took is never run here again; one it did not take is given its attempt back,
    and the next catch-up brings it again."""
    if turn.event != MESSAGE:
        return outcome is Outcome.SUCCEEDED
    if outcome is Outcome.SUCCEEDED:
        ledger.complete(turn.message.id)
        return True
    ledger.refund(turn.message.id)
    return False


async def settle(
    rest: RestClient,
    policy: Policy,
    ledger: Ledger,
    turn: ActiveTurn,
    outcome: Outcome,
    *,
    explain: bool = True,
) -> bool:
    """Apply `outcome`, shielded and bounded; True if the message's platform state moved on.

    Bounded: by `mark_wait` while the mark waits for a REST connection, then by the
    grace from the moment it has one (with no mark to send, from the start), and
    by the turn's cutoff all along. `explain`: a failed turn's error event is posted
    (not for the guidance a failed turn took)."""
    room_id = turn.message.room_id
    if not turn.settles:
        return _settled_elsewhere(ledger, turn, outcome)
    if outcome is Outcome.CONSUMED:
        ledger.complete(turn.message.id)  # done, by whoever marked it: never again here
        return True
    if outcome in (Outcome.NOT_CLAIMED, Outcome.CLAIM_STOPPED):
        ledger.refund(turn.message.id)
        return False
    if outcome is Outcome.ABORTED:
        ledger.refund(turn.message.id)  # our own abort does not use up the budget
        grace = policy.cleanup_grace
    else:
        grace = policy.settle_grace
    moved = False
    cutoff = turn.control.cutoff
    with cutoff.queued(grace, wait=policy.mark_wait) as timed:  # and by a hard stop's cutoff
        # The mark goes first: building a request costs the client ~0.2 ms, so
        # `working: false` started beside it would put the mark second on the wire.
        if outcome is Outcome.ABORTED:
            kind = turn.abort_kind
            if kind is not None and kind.consumes:
                moved = await _mark_processed(rest, ledger, turn, timed.start)
        elif outcome is Outcome.SUCCEEDED:
            moved = await _mark_processed(rest, ledger, turn, timed.start)
        else:
            failure = turn.failure or "adapter error"
            moved = await _final_mark(rest, ledger, turn, failure, timed.start)
        # `working: false` and the error event queue behind the other rooms' marks
        # (a mass abort's wave): a grace of their own, from their connection (also
        # when there was no mark to send, or it ended before it had one)
        timed.requeue()
        # the turn's keep-alive, quiet since its scope exited, ends now: its cancel and
        # its wake came after the mark, and no `working: true` of it follows
        await turn.end_beside()
        if outcome is Outcome.FAILED and moved and explain:  # the error event, beside
            # `working: false` (not for guidance the turn took: its turn said it)
            async with trio.open_nursery() as nursery:
                if turn.working:
                    nursery.start_soon(report_idle, rest, room_id, timed.start)
                await _error_event(rest, turn, timed.start)
        elif turn.working:  # alone: sent from this task, no spawn and no round first
            await report_idle(rest, room_id, timed.start)
    if timed.scope.cancelled_caught:
        # An aborted turn's mark is retried within a grace (the room brings its pass
        # forward); after an agent-wide interrupt of a thousand rooms this is routine.
        log.log(
            logging.INFO if outcome is Outcome.ABORTED else logging.WARNING,
            "room %s: settling %s (%s) overran its %.1fs grace (or its wait for a "
            "connection); any mark not sent stays ack-pending and is retried",
            room_id,
            turn.message.id,
            outcome.value,
            grace,
        )
    return moved
