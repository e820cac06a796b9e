"""One room: a serial loop that finds the next piece of work, then does it.

    Room.run
    ├── find work               one cancel scope per search: a wait, a `/next` fetch,
    │                           a page of the scan, the stopped-probe; stop and drain
    │                           cancel it, so none of them is ever polled
    └── one unit                claim → adapter → settle (`_turn.run_turn`); only the
                                turn's own abort, or the room's scope, cuts it short

Inputs are synchronous calls from the link's reader and the control lane:
`push` (a `message_created`), `offer_event` (a room or participant event, where
the rules pass events: a bridged identity's rooms), `submit` (a unit of the
room's owner: a host's forward), `joined` (the link joined the room's topics on
a connection), `interrupt`, `stop`, `play`, and `drain` (the agent is
stopping). The room's stopped and draining states are real state, read where
work is looked for, at the start of each search.

Order: a `/next` pass (`_pass.Pass`) runs before queued pushes. The first
pushed message id is the sync point: a pass ends when `/next` reaches a
message already queued from a push, so older work runs first and a message
that arrives by both paths runs once. A periodic reconcile asks for a pass; it
is a deadline of the search, so queue traffic never postpones it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

import trio

from .. import errors
from ..contract import LastAbort, Message
from ..link import Socket
from ..policy import WhileBusy
from ..wire import MentionRef
from ._answers import Answers
from ._context import RoomContext
from ._guidance import Guidance
from ._inbound import MESSAGE, Inbound, Submitted, event_unit
from ._leaving import defines_room_left, leave_topics, tell_left
from ._ledger import Ledger, Standing
from ._pass import Pass, is_own
from ._queue import RoomQueue
from ._settle import Outcome, settle
from ._turn import run_turn as run_one_turn
from ._turn_state import AbortKind, ActiveTurn

__all__ = ["Room"]

log = logging.getLogger("band_trio.runtime.room")


class Room:
    """A joined room; its owner (the rooms host) runs `run` and cancels it to leave."""

    __slots__ = (  # no instance dict: an idle agent holds one of these per room
        "_ctx",
        "_draining",
        "_interval",
        "_nursery",
        "_once",
        "_parked",
        "_pass",
        "_queue",
        "_reconcile_at",
        "_resync_due",
        "_search",
        "_stopped",
        "_told_stopped",
        "_wake",
        "answers",
        "id",
        "last_abort",
        "last_pass_found_work",
        "ledger",
        "overflowed",
        "socket",
        "turn",
    )

    def __init__(
        self, room_id: str, context: RoomContext, ledger: Ledger, *, once: bool = False
    ) -> None:
        self.id = room_id
        self._once = once
        """A departed room's last event: `run` returns once the queue is empty."""
        self._ctx = context
        self.ledger = ledger
        """Owned by the agent, so it outlives a leave and a rejoin of the room."""
        self.turn: ActiveTurn | None = None
        """The turn running now (until it has settled), if any."""
        self.socket: Socket | None = None
        """The connection the room's topics were last joined on (handed down by the link)."""
        self.last_abort: LastAbort | None = None
        """The last interrupt or stop that aborted a turn here; the next turn is told."""
        self.last_pass_found_work = True
        """Whether the last `/next` pass found a message (the reconcile backs off if not)."""
        self._queue = RoomQueue()
        """The units waiting: pushed messages at most `Policy.room_inbox` (then
        `_overflow`), room events, units the owner submitted."""
        self.overflowed = 0
        """How often the queue was full and dropped for a `/next` catch-up."""
        self._wake = trio.Event()
        self._resync_due = False
        self._pass: Pass | None = None
        self._stopped = False
        self._told_stopped = False
        """Whether the log said the platform holds the room stopped (a claim answered
        204 with no stop seen): said once until a play."""
        self._draining = False
        self._parked = False
        """Parked for work (nothing in hand, no pass, no fetch): a wake, not a cancel,
        ends the wait."""
        self._search = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self.answers = Answers(room_id, context, ledger)
        """The room's questions (`Turn.ask`) and the replies consumed for them."""
        policy = context.policy
        self._interval = policy.reconcile_interval
        self._reconcile_at = trio.current_time() + self._interval * random.uniform(0.5, 1.0)

    # -- synchronous inputs (the link's reader, the control lane, the host) -----

    @property
    def context(self) -> RoomContext:
        """What every room of its agent shares (read by a submitted unit)."""
        return self._ctx

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def queued(self) -> int:
        """Units waiting behind the one in hand (pushed messages, events, submitted)."""
        return len(self._queue)

    @property
    def joined_now(self) -> bool:
        """Whether the room's topics are joined on a connection that is open."""
        return self.socket is not None and not self.socket.closed.is_set()

    @property
    def in_flight(self) -> ActiveTurn | None:
        return self.turn

    @property
    def idle(self) -> bool:
        """No unit running or queued, and no catch-up under way or due."""
        return (
            self.turn is None
            and not self._queue
            and self._pass is None
            and not (self._resync_due and not self._stopped)
        )

    def joined(self, socket: Socket) -> None:
        """The link joined the room's topics on `socket`; catch up through `/next`.

        The pushes queued from an earlier connection are dropped for that catch-up, as
        an overflow drops them: the pushes lost while no connection was up came after
        them, so the first of them is no sync point (the pass would stop there, and
        a message posted while the agent was away would wait for the reconcile). The
        pass walks them all, in order, and stops at the first message pushed on
        this connection. A room or participant event (a bridged identity's) has no
        `/next` to come back from: it stays queued."""
        self.socket = socket
        self._queue.drop_messages()
        self.request_resync()
        self.answers.rejoined()
        self._ctx.changes.notify()

    def push(self, item: Inbound) -> None:
        """A `message_created` push. Ignored while stopped: `/next` replays it on play."""
        message = item.message
        if item.failed_attempts:
            self.ledger.spent_on_platform(message.id, item.failed_attempts)
        if self._stopped or item.processed or message.id in self._queue.ids:
            return
        if self._is_own(message) or self.answers.consuming(message.id):
            return
        if self.answers.route(message):  # a reply to a question: consumed, never queued
            return
        if len(self._queue) >= self._ctx.policy.room_inbox:
            self._overflow()
        self._queue.add(item)
        self._wake.set()
        self._ctx.changes.notify()
        turn = self.turn
        if turn is not None and not turn.finished and turn.abort_kind is None:
            self._while_busy(item, turn)

    def offer_event(self, event: str, payload: object) -> None:
        """A room or participant event, queued in order with the messages where the
        rules pass events (a bridged identity's rooms). While stopped it waits for the
        play: no `/next` would bring it back."""
        if not self._ctx.rules.events:
            return
        if len(self._queue) >= self._ctx.policy.room_inbox:
            self._overflow()
        self._queue.add(event_unit(self.id, event, payload))
        if not self._stopped:  # a stopped room's wait is for the play (and its probe)
            self._wake.set()
        self._ctx.changes.notify()

    def _overflow(self) -> None:
        """The queue is full: drop its messages and catch up through `/next` instead.
        The pass walks them oldest first and stops at the first message queued after
        them (the sync point), so the order holds and none is lost. Events have no
        `/next` to come back from: they are kept, but the oldest go if they alone
        fill the queue."""
        dropped = self._queue.drop_messages(self._ctx.policy.room_inbox)
        self.overflowed += 1
        self._ctx.counts.overflowed += 1
        log.warning(
            "room %s: %d pushed messages queued (Policy.room_inbox): dropped them for a "
            "/next catch-up",
            self.id,
            dropped,
        )
        self.request_resync()

    def _while_busy(self, item: Inbound, turn: ActiveTurn) -> None:
        """A message arrived while a turn runs: the room's `WhileBusy` strategy."""
        strategy = self._ctx.busy.for_room(self.id)
        if strategy is WhileBusy.INTERRUPT:
            self.interrupt("a newer message arrived")
        elif strategy is WhileBusy.STEER and turn.guidance is not None:
            turn.guidance.offer(item)  # it stays queued until the turn takes it
        elif strategy is WhileBusy.BUSY and self._nursery is not None:
            self._nursery.start_soon(self._busy_notice, item.message)

    async def _busy_notice(self, message: Message) -> None:
        """Tell the sender the agent is busy (best effort: the message stays queued)."""
        try:
            await self._ctx.rest.post_message(
                self.id, self._ctx.busy.notice, [MentionRef(id=message.sender_id)]
            )
        except errors.PlatformError as exc:
            log.info("room %s: busy notice for %s not posted: %s", self.id, message.id, exc)

    def request_resync(self) -> None:
        """Run a `/next` pass at the next search for work (after the current unit)."""
        if self._ctx.rules.catches_up:
            self._resync_due = True
            self._wake.set()

    def submit(self, unit: Submitted) -> None:
        """Queue a unit of the room's owner behind the room's others (`Submitted`)."""
        self._queue.add(Inbound(unit.message, False, submitted=unit))
        self._wake.set()
        self._ctx.changes.notify()

    def waiting(self) -> list[str]:
        """The ids of the messages queued behind the unit in hand, in order."""
        return self._queue.waiting()

    def withdraw(self, unit: Submitted) -> bool:
        """Take `unit` out of the queue if it has not started; whether it was there."""
        if not self._queue.withdraw(unit):
            return False
        self._ctx.changes.notify()
        return True

    def interrupt(self, reason: str | None) -> bool:
        """Abort the running turn and consume its message. No turn: nothing happens."""
        return self._abort(AbortKind.INTERRUPT, reason)

    def stop(self, reason: str | None) -> None:
        """Abort the running turn, leave its message, and take no new work until play.

        A `/next` pass in progress ends too: its next fetch would return the very
        message this stop just left `processing`.

        The turn's abort comes first, as in `interrupt`: what follows is synchronous
        too, so the order changes nothing a task can see, but the cancel reaches the
        adapter sooner. A second cancel before it (the search's, of a scope already
        exited while a turn runs) cost the stop's first hop some 30 µs over
        interrupt's (docs/benchmarks.md, "Stop's first hop").
        """
        self._abort(AbortKind.STOP, reason)
        self._stopped = True
        # its messages come back through `/next` on play; events would not
        self._ctx.counts.dropped += self._queue.drop_messages()
        self._search.cancel(reason="stop")
        self._ctx.changes.notify()

    def play(self) -> None:
        """Lift the suppression first, then catch up through `/next` at once. A play
        while a catch-up of an earlier play is under way (no stop between, and no claim
        refused as stopped) asks for no second one: that pass reaches everything the
        play would."""
        was_stopped = self._stopped or self._told_stopped
        self._stopped = False
        self._told_stopped = False
        if was_stopped or self._pass is None:
            self.request_resync()
        self._ctx.changes.notify()

    def drain(self) -> None:
        """The agent is stopping: finish the unit in hand, then end the room loop. A
        turn waiting for an answer (`Turn.ask`) is aborted instead: its message is
        left for the replay, which asks again.

        A room parked for work is woken, not cancelled: at 10,000 idle rooms a cancel
        each was a `Cancelled` raised, caught and unwound per room, its traceback left
        for the collector (docs/benchmarks.md, the scale rows). A search under way (a
        `/next` fetch, a stopped-probe) is cancelled."""
        self._draining = True
        if self.turn is not None:
            self.turn.draining.set()
            if self.answers.desk.open_now is not None:  # waiting for a person: would hold the stop
                self.turn.abort(AbortKind.SHUTDOWN, "the agent is stopping")
        if self._parked:
            self._wake.set()
        else:
            self._search.cancel(reason="draining")

    def ending(self, kind: AbortKind, reason: str) -> None:
        """The owner is about to cancel the room: record why on the running turn first.

        A turn whose adapter has already returned is not aborted (it settles, so a
        restart never answers it again); one still at work is, so even an adapter
        that swallows the cancel leaves its message `processing`."""
        turn = self.turn
        if turn is not None:
            turn.abort(kind, reason)

    def _abort(self, kind: AbortKind, reason: str | None) -> bool:
        """Abort the running turn; its keep-alive, which watches it, takes it from there.

        Nothing is spawned here: this runs on the socket's receive path, and the
        cancel should reach the adapter with as few other tasks woken as possible."""
        turn = self.turn
        if turn is None or not turn.abort(kind, reason):
            return False
        self._ctx.counts.cancelled += 1
        return True

    # -- the loop --------------------------------------------------------------

    async def run(self) -> None:
        """Find work and do it, one unit at a time; return once drained.

        Raises only on a bug; the owner restarts the loop then (state is kept).
        """
        self._pass = None
        async with trio.open_nursery() as nursery:  # busy notices, answers
            self._nursery = nursery
            self.answers.start(nursery)
            try:
                while True:
                    work: Inbound | None = None
                    with trio.CancelScope() as self._search:
                        work = await self._find_work()
                    if work is not None:
                        self._after_unit(work.message.id, await self._unit(work))
                    elif self._draining or (self._once and not self._queue):
                        return
            finally:
                self._nursery = None
                self.answers.stop()
                if nursery.child_tasks:  # an idle room's is empty: nothing to cancel
                    nursery.cancel_scope.cancel()

    def _after_unit(self, message_id: str, moved: bool) -> None:
        """Tell the pass in progress (if the unit came from it) whether the message moved on.

        A mark that did not land (its settle overran, e.g. behind a thousand others at
        the client after an agent-wide interrupt) leaves the message ack-pending: a
        pass retries just the mark, brought forward to one cleanup grace from now
        rather than left to the next reconcile."""
        if self._pass is not None:
            self._pass.outcome(message_id, moved)
        if not moved and self.ledger.standing(message_id) is Standing.ACK_PENDING:
            soon = trio.current_time() + self._ctx.policy.cleanup_grace
            if soon < self._reconcile_at:
                self._reconcile_at = soon

    async def _find_work(self) -> Inbound | None:
        """The next unit to run, in order; None once draining (or, for a departed
        room's last event, once its queue is empty)."""
        while not self._draining:
            if self._once and not self._queue:
                return None
            if self._stopped:
                if self._pass is not None:  # play starts afresh with its own pass
                    self._pass = None
                    self._ctx.changes.notify()
                await self._while_stopped()
                continue
            now = trio.current_time()
            if now >= self._reconcile_at and self._ctx.rules.catches_up:
                self._reconcile_tick(now)
            if self._pass is None and self._resync_due:
                self._resync_due = False
                self._pass = Pass(self.id, self._ctx, self.ledger, self._queue.ids)
                self._ctx.counts.passes += 1
            if self._pass is not None:
                message = await self._pass.next()
                if message is not None:
                    return message
                if self._pass.found_work is not None:
                    self.last_pass_found_work = self._pass.found_work
                self._pass = None
                self._ctx.changes.notify()  # caught up: `idle` may hold now
                continue
            if self._queue:
                return self._queue.pop()
            self._wake = trio.Event()
            self._parked = True
            try:
                with trio.move_on_at(self._reconcile_at):
                    await self._wake.wait()
            finally:
                self._parked = False
        return None

    def _reconcile_tick(self, now: float) -> None:
        """Ask for a pass; the next one comes sooner if this room has been busy."""
        policy = self._ctx.policy
        if self.last_pass_found_work:
            self._interval = policy.reconcile_interval
        else:
            self._interval = min(self._interval * 2, policy.reconcile_interval_max)
        self._reconcile_at = now + self._interval
        self._resync_due = True

    async def _while_stopped(self) -> None:
        """Wait for play; every probe interval, look for a play we missed."""
        with trio.move_on_after(self._ctx.policy.stopped_probe_interval):
            self._wake = trio.Event()
            await self._wake.wait()
            return
        try:
            head = await self._ctx.rest.next_message(self.id)
        except errors.PlatformError as exc:
            log.info("room %s: stopped-probe failed: %s", self.id, exc)
            return
        if head is not None and self._stopped:
            log.info("room %s: /next shows work while stopped: taking it as a missed play", self.id)
            self.play()

    # -- one unit --------------------------------------------------------------

    def _is_own(self, message: Message) -> bool:
        return is_own(message, self._ctx.agent_id)

    async def _unit(self, item: Inbound) -> bool:
        """Deal with one unit. Returns True if its message's platform state moved on."""
        message = item.message
        if item.submitted is not None:
            return await item.submitted.run(self)
        if item.event != MESSAGE:
            return await self.run_turn(item, settles=False)
        if self._is_own(message) or self.answers.consuming(message.id):
            return False
        standing = self.ledger.standing(message.id)
        if standing is Standing.ACK_PENDING:
            return await self.settle_pending(message)
        if standing is not Standing.RUNNABLE:
            return False
        consumed = await self.answers.in_order(message)  # a late reply to a question
        if consumed is not None:
            return consumed
        if item.replayed:  # the run before may have died asking
            await self.answers.read_back()
        return await self.run_turn(item, settles=self._ctx.rules.claims)

    async def settle_pending(self, message: Message) -> bool:
        """Send the final mark of an ack-pending message again (its turn ran here)."""
        # the claim stays unknown: the mark re-claims first
        ctx = self._ctx
        turn = ActiveTurn(message, ctx.policy, cutoff=ctx.cutoff, threads=ctx.threads)
        turn.failure = self.ledger.pending_failure(message.id)
        outcome = Outcome.SUCCEEDED if turn.failure is None else Outcome.FAILED
        try:
            return await settle(ctx.rest, ctx.policy, self.ledger, turn, outcome)
        finally:
            ctx.changes.notify()  # the standing may have moved on

    async def run_turn(
        self,
        item: Inbound,
        *,
        settles: bool,
        made: Callable[[ActiveTurn], None] | None = None,
    ) -> bool:
        """One turn of `item`: claim (if the runtime `settles` it) → work → settle.
        `made(turn)` is told the turn as soon as it exists (before its claim)."""
        message = item.message
        ctx = self._ctx
        turn = self.turn = ActiveTurn(
            message, ctx.policy, cutoff=ctx.cutoff, threads=ctx.threads, settles=settles,
            event=item.event, wire=item.wire,
        )  # fmt: skip
        turn.desk = self.answers.desk
        if item.event == MESSAGE and ctx.busy.for_room(self.id) is WhileBusy.STEER:
            turn.guidance = Guidance(self._queue)
        if made is not None:
            made(turn)
        self._ctx.changes.notify()
        try:
            return await run_one_turn(self._ctx, self.ledger, turn, self.last_abort)
        finally:
            if turn.outcome is Outcome.CLAIM_STOPPED:
                self._claim_stopped(message.id)
            if turn.abort_kind is not None:
                self.last_abort = turn.abort_kind.note(turn.abort_reason, message.id) or (
                    self.last_abort
                )
            self.answers.after_turn(stopped=self._stopped or turn.abort_kind is AbortKind.STOP)
            self.turn = None
            self._ctx.changes.notify()

    def _claim_stopped(self, message_id: str) -> None:
        """A claim answered 204: the platform's gate is closed for this room. No stop
        reached this agent (a stop sent while none was connected outlives it, and the
        join says nothing of it), so the first such claim says so, with the way out; the
        message stays for the play, which replays it through `/next`."""
        if self._told_stopped or self._stopped:
            return
        self._told_stopped = True
        log.warning(
            "room %s: the platform holds this room stopped (the claim of %s answered 204): "
            "nothing is answered here until a play (`band-trio ctl play`, or Play in the "
            "console)",
            self.id,
            message_id,
        )

    # -- leaving ---------------------------------------------------------------

    def close_needed(self, *, leave: bool) -> bool:
        """Whether `close` has anything to do: a leave, or an `on_room_left` the adapter
        defines. An idle room at the shutdown with the base hook (which does nothing)
        then costs its host no shielded, bounded scope."""
        if not self._ctx.rules.tells_left:
            return False
        return leave or defines_room_left(self._ctx.adapter)

    async def close(self, *, leave: bool) -> None:
        """Leave the room's topics on the connection they were joined on (if it is
        still open, and `leave`: not when the agent is stopping, whose socket close
        leaves them all; under the cleanup grace), then tell the adapter (under the
        hook deadline). The owner shields this."""
        policy = self._ctx.policy
        if leave:
            await leave_topics(self.socket, self.id, policy)
        await tell_left(
            self.id, "the adapter's on_room_left", self._ctx.adapter.on_room_left, policy
        )
