"""One room: a serial loop of turns, in platform order, inside the room's own scope.

Inputs are pushes (`push`, called synchronously by the websocket reader) and
`/next` passes (start-up backlog, reconciles, replays after play). The first
pushed message id is the sync point: a backlog pass stops when `/next` reaches
a message that is already queued from a push, so older work runs first and a
message that arrives by both paths runs once. Control signals (`interrupt`,
`stop`, `play`) are synchronous too: they cancel the running turn's scope or
flip the room's suppression and wake the loop.
"""

from __future__ import annotations

import logging
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import trio

from .. import errors
from ..contract import Adapter, Message, Turn
from ..link import RestClient, Socket
from ..policy import Policy
from ._inbound import Inbound, inbound
from ._ledger import Ledger, Standing
from ._settle import Outcome, report_idle, settle
from ._turn import AbortKind, ActiveTurn, PlatformPort

__all__ = ["Overrun", "Room", "RoomContext"]

log = logging.getLogger("band_trio.runtime.room")

_ROOM_ERRORS = (errors.PlatformError, errors.JoinError, errors.ConnectionClosedError)


@dataclass(frozen=True, slots=True)
class Overrun:
    """Work that outlived its grace after being told to stop."""

    room_id: str
    message_id: str | None
    what: str


@dataclass(frozen=True, slots=True)
class RoomContext:
    """What every room of one agent shares."""

    agent_id: str
    rest: RestClient
    adapter: Adapter
    policy: Policy
    socket: Callable[[], Socket | None]
    changed: Callable[[], None]
    """Tell the agent its observable state moved (a turn began or ended, ...)."""
    overran: Callable[[Overrun], None]


def chat_topic(room_id: str) -> str:
    return f"chat_room:{room_id}"


def participants_topic(room_id: str) -> str:
    return f"room_participants:{room_id}"


class Room:
    """A joined room. Its task is `run`; leaving the room is `scope.cancel()`."""

    def __init__(self, room_id: str, context: RoomContext, ledger: Ledger) -> None:
        self.id = room_id
        self._ctx = context
        self.scope = trio.CancelScope()
        self.ready = trio.Event()
        """Set once the room's topics are joined (or the room gave up joining)."""
        self.ledger = ledger
        """Owned by the agent, so it outlives a leave and a rejoin of the room."""
        self._inbox: deque[Message] = deque()
        self._queued: set[str] = set()
        self._wake = trio.Event()
        self._resync_due = True
        self._stopped = False
        self._draining = False
        self.turn: ActiveTurn | None = None
        self._nursery: trio.Nursery | None = None
        self._fetch_scope = trio.CancelScope()
        self.last_pass_found_work = True
        """Whether the last `/next` pass found a message (the reconcile backs off if not)."""

    # -- synchronous inputs (websocket reader, control lane, agent) ---------

    @property
    def stopped(self) -> bool:
        return self._stopped

    def push(self, item: Inbound) -> None:
        """A `message_created` push. Ignored while stopped: `/next` replays it on play."""
        message = item.message
        if self._stopped or item.processed or message.id in self._queued:
            return
        if self._is_own(message):
            return
        self._inbox.append(message)
        self._queued.add(message.id)
        self._wake.set()

    def request_resync(self) -> None:
        """Run a `/next` pass at the next opportunity (after the current turn)."""
        self._resync_due = True
        self._wake.set()

    def interrupt(self, reason: str | None) -> bool:
        """Abort the running turn and consume its message. No turn: nothing happens."""
        return self._abort(AbortKind.INTERRUPT, reason)

    def stop(self, reason: str | None) -> None:
        """Abort the running turn, leave its message, and take no new work until play.

        A `/next` pass in progress ends too: its next fetch would return the very
        message this stop just left `processing`.
        """
        self._stopped = True
        self._inbox.clear()
        self._queued.clear()
        self._fetch_scope.cancel(reason="stop")
        self._abort(AbortKind.STOP, reason)
        self._wake.set()
        self._ctx.changed()

    def _abort(self, kind: AbortKind, reason: str | None) -> bool:
        turn = self.turn
        if turn is None or not turn.abort(kind, reason):
            return False
        if self._nursery is not None:
            self._nursery.start_soon(self._watch_abort, turn)
        return True

    async def _watch_abort(self, turn: ActiveTurn) -> None:
        """Report a turn that outlives its cleanup grace after being aborted."""
        grace = self._ctx.policy.cleanup_grace
        with trio.move_on_after(grace):
            await turn.done.wait()
            return
        kind = turn.abort_kind.value if turn.abort_kind is not None else "cancel"
        log.error(
            "room %s: the turn for %s ignored its %s for more than %.1fs",
            self.id,
            turn.message.id,
            kind,
            grace,
        )
        self._ctx.overran(Overrun(self.id, turn.message.id, f"ignored the {kind}"))

    def play(self) -> None:
        """Lift the suppression first, then catch up through `/next` at once."""
        self._stopped = False
        self.request_resync()
        self._ctx.changed()

    def drain(self) -> None:
        """Take no new work (the agent is stopping); the running turn may finish."""
        self._draining = True
        self._wake.set()

    # -- the task ------------------------------------------------------------

    async def run(self) -> None:
        with self.scope:
            try:
                await self._join()
                self.ready.set()
                self._ctx.changed()
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._reconcile_timer)
                    await self._supervise()
            finally:
                self.ready.set()
                with trio.move_on_after(self._ctx.policy.cleanup_grace, shield=True):
                    await self._leave()
                    await self._ctx.adapter.on_room_left(self.id)

    async def _join(self) -> None:
        """Join the room's topics, retrying with backoff (1, 2, 4, ... s).

        A join the platform refuses is retried `join_refusals` times (the room may
        be gone: band-sdk gives up the same way), then the room removes itself;
        no answer, or no connection, is retried for as long as it takes.
        """
        delay = self._ctx.policy.room_restart_base * 2
        refusals = 0
        while True:
            socket = self._ctx.socket()
            try:
                if socket is None:
                    raise errors.ConnectionClosedError("not connected")
                await self.join_topics(socket)
                return
            except errors.JoinError as exc:
                refusals += exc.refused
                if refusals > self._ctx.policy.join_refusals:
                    log.warning(
                        "room %s: join refused %d times (%s); giving up",
                        self.id,
                        refusals,
                        exc.reason,
                    )
                    self.scope.cancel(reason="join refused")
                    await trio.lowlevel.checkpoint()
                log.warning("room %s: %s; retrying in %.1fs", self.id, exc, delay)
            except (errors.PlatformError, errors.ConnectionClosedError) as exc:
                log.warning("room %s: join failed (%s); retrying in %.1fs", self.id, exc, delay)
            await trio.sleep(delay)
            delay = min(delay * 2, self._ctx.policy.room_restart_cap)

    async def join_topics(self, socket: Socket) -> None:
        """Join `chat_room` then `room_participants` (never in parallel, as band-sdk)."""
        await socket.join(chat_topic(self.id))
        try:
            await socket.join(participants_topic(self.id))
        except BaseException:
            with trio.move_on_after(self._ctx.policy.cleanup_grace, shield=True):
                await socket.leave(chat_topic(self.id))
            raise

    async def _leave(self) -> None:
        socket = self._ctx.socket()
        if socket is not None and not socket.closed.is_set():
            await socket.leave(chat_topic(self.id))
            await socket.leave(participants_topic(self.id))

    async def _supervise(self) -> None:
        """Run the loop; a crash is logged and the loop restarted with backoff."""
        delay = self._ctx.policy.room_restart_base
        while True:
            try:
                await self._loop()
            except Exception:
                log.exception("room %s: loop crashed; restarting in %.1fs", self.id, delay)
                await trio.sleep(delay)
                delay = min(delay * 2, self._ctx.policy.room_restart_cap)
                self._resync_due = True

    async def _loop(self) -> None:
        while True:
            if self._draining:
                await trio.sleep_forever()
            if self._stopped:
                await self._while_stopped()
            elif self._resync_due:
                self._resync_due = False
                await self._pass()
            elif self._inbox:
                message = self._inbox.popleft()
                self._queued.discard(message.id)
                await self._handle(message)
            else:
                self._wake = trio.Event()
                await self._wake.wait()

    async def _while_stopped(self) -> None:
        """Wait for play; every probe interval, look for a play we missed."""
        with trio.move_on_after(self._ctx.policy.stopped_probe_interval):
            while self._stopped and not self._draining:
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

    async def _pass(self) -> None:
        """Process `/next` until it is empty, a queued push is reached, or no progress.

        A head that can never move on in this process (its attempts are spent) would
        come back from every `/next` and hide the messages behind it; the pass then
        walks the room's unprocessed list once, past it, instead of spinning.
        """
        while not self._stopped and not self._draining:
            with trio.CancelScope() as self._fetch_scope:
                try:
                    head = await self._ctx.rest.next_message(self.id)
                except errors.PlatformError as exc:
                    log.warning(
                        "room %s: /next failed (%s); the next reconcile retries", self.id, exc
                    )
                    return
            if self._fetch_scope.cancelled_caught:
                return  # stopped while fetching
            if head is None:
                self.last_pass_found_work = False
                return
            self.last_pass_found_work = True
            item = inbound(self.id, self._ctx.agent_id, head)
            if item.message.id in self._queued:
                return  # the sync point: pushes take it from here, in order
            if self._is_stuck(item.message):
                await self._scan()
                return
            if not await self._handle(item.message):
                # No progress: the same head would come back. Don't spin on it; if it can
                # only wait for its final mark, serve the messages behind it meanwhile.
                if self.ledger.standing(item.message.id) is Standing.ACK_PENDING:
                    await self._scan()
                return

    def _is_stuck(self, message: Message) -> bool:
        standing = self.ledger.standing(message.id)
        return self._is_own(message) or standing in (Standing.EXHAUSTED, Standing.COMPLETED)

    async def _scan(self) -> None:
        """One walk over the room's unprocessed messages, oldest first, past stuck ones."""
        cursor: str | None = None
        while not self._stopped and not self._draining:
            with trio.CancelScope() as self._fetch_scope:
                try:
                    page = await self._ctx.rest.unprocessed(self.id, cursor)
                except errors.PlatformError as exc:
                    log.warning("room %s: scan failed (%s)", self.id, exc)
                    return
            if self._fetch_scope.cancelled_caught:
                return
            for wire in page.data:
                item = inbound(self.id, self._ctx.agent_id, wire)
                if self._stopped or self._draining or item.message.id in self._queued:
                    return
                if not item.processed and not self._is_stuck(item.message):
                    await self._handle(item.message)
            if not page.metadata.has_more or page.metadata.next_cursor is None:
                return
            cursor = page.metadata.next_cursor

    async def _reconcile_timer(self) -> None:
        """Request a `/next` pass periodically, doubling the interval while passes find nothing."""
        policy = self._ctx.policy
        interval = policy.reconcile_interval
        await trio.sleep(interval * random.uniform(0.5, 1.0))
        while True:
            self.request_resync()
            await trio.sleep(interval)
            if self.last_pass_found_work:
                interval = policy.reconcile_interval
            else:
                interval = min(interval * 2, policy.reconcile_interval_max)

    # -- one message -----------------------------------------------------------

    def _is_own(self, message: Message) -> bool:
        return message.sender_type == "Agent" and message.sender_id == self._ctx.agent_id

    async def _handle(self, message: Message) -> bool:
        """Deal with one message. Returns True if its platform state moved on."""
        if self._is_own(message):
            return False
        standing = self.ledger.standing(message.id)
        if standing is Standing.ACK_PENDING:  # retry the final mark only
            turn = ActiveTurn(message)  # claimed stays unknown: the mark re-claims first
            turn.failure = self.ledger.pending_failure(message.id)
            outcome = Outcome.SUCCEEDED if turn.failure is None else Outcome.FAILED
            return await settle(self._ctx, self.ledger, turn, outcome)
        if standing is not Standing.RUNNABLE:
            return False
        return await self._run_turn(message)

    async def _run_turn(self, message: Message) -> bool:
        turn = ActiveTurn(message)
        outcome = Outcome.ABORTED
        self.turn = turn
        self._ctx.changed()
        self.ledger.charge(message.id)
        try:
            with turn.scope:
                outcome = await self._claim_and_run(turn)
        except BaseException:
            # Cancelled from outside (the room left, the agent stopping) or a bug: this is
            # not an interrupt, so nothing is marked; the message stays `processing`.
            if turn.finished and turn.abort_kind is None:
                # ...but the adapter was already done with it: keep that, so only the
                # final mark is retried later, never the adapter
                self.ledger.ack_pending(message.id, turn.failure)
            else:
                self.ledger.refund(message.id)
            if turn.working:
                with trio.move_on_after(self._ctx.policy.cleanup_grace, shield=True):
                    await report_idle(self._ctx.rest, self.id)
            raise
        finally:
            self.turn = None
            turn.done.set()
            self._ctx.changed()
        if turn.abort_kind is not None:
            outcome = Outcome.ABORTED  # even if the adapter swallowed the cancellation
        return await settle(self._ctx, self.ledger, turn, outcome)

    async def _claim_and_run(self, turn: ActiveTurn) -> Outcome:
        rest = self._ctx.rest
        try:
            claim = await rest.claim(self.id, turn.message.id)
        except errors.PlatformError as exc:
            turn.claimed = False
            log.warning("room %s: claim of %s failed: %s", self.id, turn.message.id, exc)
            return Outcome.NOT_CLAIMED
        turn.claimed = claim is not None
        if claim is None:
            return Outcome.CLAIM_STOPPED
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._keep_working, turn)
            try:
                await self._ctx.adapter.on_turn(Turn(turn.message, PlatformPort(rest, turn)))
                turn.finished = True  # no checkpoint since the return: the work is done
            except Exception as exc:
                turn.finished = True
                turn.failure = f"{type(exc).__name__}: {exc}"[:200]
                log.warning(
                    "room %s: adapter failed on %s: %s",
                    self.id,
                    turn.message.id,
                    turn.failure,
                    exc_info=exc,
                )
                return Outcome.FAILED
            finally:
                nursery.cancel_scope.cancel()
        return Outcome.SUCCEEDED

    async def _keep_working(self, turn: ActiveTurn) -> None:
        """`working: true` now and every keep-alive period; a `false` answer is a platform stop."""
        while True:
            turn.working = True
            try:
                working = await self._ctx.rest.report_activity(self.id, True)
            except errors.PlatformError as exc:
                log.debug("room %s: activity report failed: %s", self.id, exc)
            else:
                if not working:
                    turn.abort(AbortKind.PLATFORM_STOP, "the platform reports the room stopped")
                    return
            await trio.sleep(self._ctx.policy.working_keep_alive)
