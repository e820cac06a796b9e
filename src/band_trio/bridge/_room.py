"""One room of one identity: a serial queue of forwards, each in its own cancel scope.

    ForwardRoom.run                 the room's task, run by the runtime's rooms host
                                    (`RoomHost`), which cancels it to leave
    └── one unit at a time, in arrival order, each in a cancel scope:
        ├── a forward               an event to the target, under the global cap;
        │                           a message claimed first and marked after, when
        │                           the bridge settles (`_settle`)
        └── a catch-up              `GET /next`, then a forward of what it returns,
                                    again until 204; past a head that cannot move on
                                    here, the room's unprocessed list, page by page

Inputs are synchronous calls from the link's reader (never awaiting, never a
REST call): `offer` (an event from the tap), `joined` (the room's topics were
joined: rehydrate through a catch-up), and the control lane's `interrupt`,
`stop`, `play`.

* interrupt and stop cancel the unit in flight *and* clear every unit queued
  behind it: none of them reaches the target. stop also leaves pushed messages
  for `/next` until play; interrupt consumes the message it cut off (marks it
  `processed`, on the bridge's claim or the target's: `_settle.consume`).
* play queues one catch-up (never two, nor one beside a catch-up in flight):
  it is tracked work of this task, never run on the receive path, and a
  following stop cancels it while its `/next` is still in flight.
* A message is remembered as forwarded only once the target took it.
* A failed forward (or `/next`) makes a catch-up due after a backoff (`Retry`):
  the room's loop waits for its wake event with that deadline. interrupt and
  stop clear it with the queue; with the bridge settling, a message that failed
  `forward_attempts` times in a row is marked `failed` and left behind.
* An aborted forward is decided by the abort's kind, never by what the target
  raised: interrupt consumes the message, every other abort leaves it (a target
  that fails as it unwinds — a start cut by its grace — is not a failed forward,
  so nothing is retried and an interrupted message is never forwarded again).
* The host's cancels (a leave, the shutdown after its grace, a hard stop) come
  through `ending`, which aborts the forward in flight first and drops the queue.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import NoReturn

import trio

from .. import errors
from ..contract import Message, adapter_failure
from ..link import Socket
from ..observe import hooks as observe
from ..runtime._parts import (
    AbortKind,
    Inbound,
    OwnPosts,
    Pages,
    inbound,
    leave_topics,
    tell_left,
)
from ..wire import ChatMessage
from ._envelope import Envelope, envelope_for
from ._port import turn_for
from ._settle import Claim, Retry, claim, consume, done_here, gave_up, mark_processed
from ._shared import Forward, Shared

__all__ = ["ForwardRoom"]

log = logging.getLogger("band_trio.bridge.room")


class _Unit:
    """A queued forward (`envelope`), or a catch-up through `/next` (no envelope)."""

    __slots__ = ("envelope", "message", "why")

    def __init__(
        self, envelope: Envelope | None, message: Message | None = None, why: str = ""
    ) -> None:
        self.envelope = envelope
        self.message = message
        self.why = why


class ForwardRoom:
    """A room of a bridged identity; its owner runs `run` and cancels it to leave.

    `once`: a departed room's last event (`run` returns once the queue is empty)."""

    def __init__(self, room_id: str, shared: Shared, *, once: bool = False) -> None:
        self.id = room_id
        self._shared = shared
        self._once = once
        self._draining = False
        self.socket: Socket | None = None
        """The connection the room's topics were last joined on (handed down by the link)."""
        self._queue: deque[_Unit] = deque()
        self._queued: set[str] = set()
        """Message ids queued or in flight here (a copy arriving meanwhile is dropped)."""
        self._catch_up_queued = False
        self._stopped = False
        self._wake = trio.Event()
        self._retry = Retry(shared.bridge_policy)
        self.running: Forward | None = None
        self.signalled_at: float | None = None
        """`time.perf_counter()` when an interrupt or stop last cleared this room (the
        benchmark compares it with the platform's stamp of the control frame)."""
        self.joins = 0
        """How many times the link joined the room's topics (connections)."""
        self._own_posts = OwnPosts(shared.policy.completed_memory)
        """The identity's posts in this room this process knows of (a target's posts
        land once: `runtime._posts`)."""

    # -- synchronous inputs (the link's reader, the control lane) --------------

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def idle(self) -> bool:
        return self.running is None and not self._queue

    @property
    def in_flight(self) -> Forward | None:
        return self.running

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def retry_pending(self) -> bool:
        """A catch-up is due after a failure's backoff."""
        return self._retry.pending

    @property
    def retry_delay(self) -> float:
        """The backoff the next failure would wait (`retry_first` after a success)."""
        return self._retry.delay

    @property
    def joined_now(self) -> bool:
        """Whether the room's topics are joined on a connection that is open."""
        return self.socket is not None and not self.socket.closed.is_set()

    def joined(self, socket: Socket) -> None:
        """Topics joined (first time, or after a reconnect): rehydrate via `/next`."""
        self.joins += 1
        self.socket = socket
        self._shared.changes.notify()
        if not self._stopped:
            self._catch_up("rehydrate")

    def push(self, item: Inbound) -> None:
        """Unused: the bridge forwards from the link's tap, which has the raw payload."""

    def offer(self, envelope: Envelope, message: Message | None = None) -> None:
        """Queue `envelope` behind the room's other forwards."""
        message_id = envelope.message_id
        if message_id is not None and (
            self._stopped or message_id in self._queued or message_id in self._shared.forwarded
        ):
            return
        if len(self._queue) >= self._shared.bridge_policy.room_queue:
            self._overflow()
        if message_id is not None:
            self._queued.add(message_id)
        self._queue.append(_Unit(envelope, message))
        self._wake.set()

    def _overflow(self) -> None:
        """The queue is full: drop its messages and queue a `/next` catch-up instead,
        which forwards them oldest first and stops at the first message queued after
        them (the sync point). Other events have no `/next` to come back from: kept,
        but the oldest go if they alone fill the queue."""
        cap = self._shared.bridge_policy.room_queue
        kept = deque(u for u in self._queue if u.envelope is None or u.envelope.message_id is None)
        dropped = len(self._queue) - len(kept)
        for unit in self._queue:
            if unit.envelope is not None and unit.envelope.message_id is not None:
                self._queued.discard(unit.envelope.message_id)
        if not any(u.envelope is None for u in kept):
            kept.append(_Unit(None, why="overflow"))
            self._catch_up_queued = True
        while len(kept) >= cap:  # events alone fill it: the oldest event goes
            lost = next(i for i, u in enumerate(kept) if u.envelope is not None)
            del kept[lost]
            dropped += 1
        self._queue = kept
        self._shared.counters.overflowed += 1
        log.warning(
            "room %s: %d queued units (BridgePolicy.room_queue): dropped %d for a /next catch-up",
            self.id,
            cap,
            dropped,
        )
        self._shared.changes.notify()

    def interrupt(self, reason: str | None) -> bool:
        return self._cancel(AbortKind.INTERRUPT, reason)

    def stop(self, reason: str | None) -> None:
        self._stopped = True
        self._cancel(AbortKind.STOP, reason)

    def play(self) -> None:
        self._stopped = False
        self._catch_up("play")

    def request_resync(self) -> None:
        """The host restarted a crashed loop: catch up on what it may have skipped."""
        if not self._stopped:
            self._catch_up("restart")

    def drain(self) -> None:
        """The identity is stopping: forward what is queued, then end the loop."""
        self._draining = True
        self._wake.set()

    def ending(self, kind: AbortKind, reason: str) -> None:
        """The host is about to cancel the room (a leave, the shutdown after its grace,
        a hard stop): abort the forward in flight first — a remote start of its target
        is then bounded by the stop grace, and its message is left — and drop the
        queue."""
        self._cancel(kind, reason)

    def _catch_up(self, why: str) -> None:
        if not self._catch_up_queued:
            self._catch_up_queued = True
            self._queue.append(_Unit(None, why=why))
            self._wake.set()

    def _cancel(self, kind: AbortKind, reason: str | None) -> bool:
        """Cancel the unit in flight and clear the queue behind it; True if it hit any."""
        self.signalled_at = time.perf_counter()
        counters = self._shared.counters
        dropped = len(self._queue)
        counters.dropped += dropped
        self._queue.clear()
        self._catch_up_queued = False
        self._retry.clear()  # stop: play's catch-up resumes it; interrupt: the next failure
        running = self.running
        self._queued.clear()
        hit = running is not None and running.abort(kind, reason)
        if hit:
            counters.cancelled += 1
        if hit or dropped:
            log.info(
                "room %s: %s cancelled %d forward(s) in flight and %d queued",
                self.id,
                kind.value,
                int(hit),
                dropped,
            )
        self._shared.changes.notify()
        return hit or dropped > 0

    def close_needed(self, *, leave: bool) -> bool:
        """Always: the target is told of every room it served (`room_left`)."""
        return True

    async def close(self, *, leave: bool) -> None:
        """After the room's task ended (the host shields this): leave its topics (unless
        the host is shutting down: the socket's close leaves them all), then tell the
        target the room is gone (it drops what it kept for it: the A2A target's
        context), under the hook deadline."""
        policy = self._shared.policy
        if leave:
            await leave_topics(self.socket, self.id, policy)
        await tell_left(self.id, "the target's room_left", self._shared.target.room_left, policy)

    # -- the room's task -------------------------------------------------------

    async def run(self) -> None:
        """Forward the queue, one unit at a time, until cancelled by the owner (or, once
        draining or for a departed room's last event, until the queue is empty)."""
        shared = self._shared
        while True:
            while not self._queue:
                if self._once or self._draining:
                    return
                if self._retry.take_due() and not self._stopped:
                    self._catch_up("retry")
                    continue
                with trio.move_on_at(self._retry.due):
                    await self._wake.wait()
                if self._wake.is_set():
                    self._wake = trio.Event()
            unit = self._queue.popleft()
            key = unit.envelope.message_id if unit.envelope is not None else None
            forward = self.running = Forward(
                self.id, key or unit.why or "event", shared.policy, shared.cutoff, shared.threads
            )
            shared.changes.notify()
            try:
                try:
                    with forward.scope:
                        if unit.envelope is None:
                            await self._catch_up_pass(forward, unit.why)
                        else:
                            await self._deliver(unit.envelope, unit.message, forward)
                finally:
                    forward.finished = True
                    forward.done.set()
                if forward.kind is AbortKind.INTERRUPT and forward.delivering is not None:
                    await consume(shared, self.id, forward.delivering, forward.claimed)
            finally:
                self.running = None
                if unit.envelope is None:  # a later play or rejoin nudges again
                    self._catch_up_queued = any(u.envelope is None for u in self._queue)
                if key is not None:
                    self._queued.discard(key)
                shared.stops.add(forward.control.stops)
                shared.changes.notify()

    async def _catch_up_pass(self, forward: Forward, why: str) -> None:
        """`GET /next`, forward what it returns, again — until 204, a message queued
        from a push (the sync point), or a forward that failed. A head that cannot
        move on here (forwarded already, given up, our own) would come back from
        every `/next`: the room's unprocessed list is walked past it instead."""
        shared = self._shared
        shared.counters.nudges += 1
        while True:
            try:
                wire = await shared.rest.next_message(self.id)
            except errors.PlatformError as exc:
                log.warning("room %s: the %s catch-up failed: %s", self.id, why, exc)
                self._failed()
                return
            if wire is None or wire.id in self._queued:
                return
            if done_here(shared, wire):
                await self._walk_past(forward, why)
                return
            if not await self._forward_wire(wire, forward):
                return

    async def _walk_past(self, forward: Forward, why: str) -> None:
        """The room's unprocessed messages, oldest first, page by page (as the
        runtime's catch-up walks past a stuck head), forwarding what is still due."""
        shared = self._shared
        pages = Pages(shared.policy.scan_pages, f"room {self.id}: the {why} catch-up's scan")
        while pages.more:
            try:
                page = await shared.rest.unprocessed(self.id, pages.cursor)
            except errors.PlatformError as exc:
                log.warning("room %s: the %s catch-up's scan failed: %s", self.id, why, exc)
                self._failed()
                return
            for wire in page.data:
                if wire.id in self._queued:
                    return
                if done_here(shared, wire) or inbound(self.id, shared.agent_id, wire).processed:
                    continue
                if not await self._forward_wire(wire, forward):
                    return
            pages.advance(page.metadata)

    async def _forward_wire(self, wire: ChatMessage, forward: Forward) -> bool:
        shared = self._shared
        envelope = envelope_for("message_created", shared.agent_id, self.id, wire)
        message = inbound(self.id, shared.agent_id, wire).message
        self._queued.add(wire.id)
        try:
            return await self._deliver(envelope, message, forward)
        finally:
            self._queued.discard(wire.id)

    def _failed(self) -> None:
        """A catch-up is due after the backoff (not while stopped: play catches up)."""
        if not self._stopped:
            log.info("room %s: catching up again in %gs", self.id, self._retry.failed())

    async def _deliver(self, envelope: Envelope, message: Message | None, forward: Forward) -> bool:
        """One forward under the global cap; True once the room may move on (the target
        took it, or it is settled). While it is in flight, `forward.delivering` names
        its message: what an interrupt that cuts it off consumes (a catch-up's earlier,
        finished forwards are not). A cancel leaves it set for the room to consume."""
        shared = self._shared
        message_id = envelope.message_id
        settles = shared.settles and message is not None and message_id is not None
        forward.delivering = message_id
        forward.claimed = False
        if settles and message_id is not None:
            forward.claiming = True  # an abort waits for the answer (`Forward.abort`)
            try:
                claimed = await claim(shared, self.id, message_id)
            finally:
                forward.claim_answered()
            if claimed is not Claim.CLAIMED:
                forward.delivering = None
                if claimed is Claim.CONSUMED:
                    shared.forwarded.add(message_id)
                    return True
                if claimed is Claim.FAILED:
                    self._failed()
                return False
            forward.claimed = True
        delivered = await self._attempt(envelope, message, forward)
        forward.delivering = None
        if delivered:
            self._retry.succeeded()
            if message_id is not None:
                self._retry.forget(message_id)
                if settles:
                    await mark_processed(shared, self.id, message_id)
            return True
        if message_id is not None and await gave_up(shared, self._retry, self.id, message_id):
            return True
        self._failed()
        return False

    async def _attempt(self, envelope: Envelope, message: Message | None, forward: Forward) -> bool:
        """One forward to the target, watched (`observe.Work`): its span, outcome and
        duration, and the latency of the interrupt or stop that cuts it off."""
        shared = self._shared
        key = envelope.message_id or envelope.event_type
        attributes = {"band.agent.id": shared.agent_id, "band.event.type": envelope.event_type}
        where = {"room_id": self.id, "message_id": key}
        with observe.Work(
            "forward", forward.control, **where, attributes=attributes, log=log
        ) as watch:
            return await self._send(envelope, message, forward, watch)

    async def _send(
        self, envelope: Envelope, message: Message | None, forward: Forward, watch: observe.Work
    ) -> bool:
        """One call of the target under the global cap and the forward's deadline: True
        once it took the envelope, False if it did not. A forward aborted meanwhile
        unwinds as its cancel does, whatever the target answered or raised: the abort's
        kind decides (interrupt consumes, anything else leaves the message), so an
        interrupted message is never forwarded again."""
        shared = self._shared
        counters = shared.counters
        within = shared.bridge_policy.forward_deadline
        failure: str | None = None
        raised: BaseException | None = None
        async with shared.limiter:
            counters.in_flight += 1
            shared.changes.notify()
            try:
                deadline = trio.current_time() + within
                forward.control.deadline = deadline  # a remote start gets the grace beyond it
                with trio.move_on_at(deadline) as timed:
                    try:
                        turn = turn_for(
                            envelope, message, forward, shared.rest, policy=shared.policy,
                            known=self._own_posts,
                        )  # fmt: skip
                        await shared.target.forward(envelope, turn)
                    except errors.ForwardError as exc:
                        failure = f"not forwarded: {exc}"
                    except BaseException as exc:  # a target's bug stays in this room (closing.md)
                        if not adapter_failure(exc):  # a cancel, or a real Ctrl-C: on up
                            raise
                        failure = f"not forwarded: the target raised {type(exc).__name__}"
                        raised = exc
                if timed.cancelled_caught:
                    failure = f"not forwarded within {within:g}s"
            finally:
                counters.in_flight -= 1
        if forward.kind is not None:  # aborted: not the target's success, nor its failure
            await _unwind(forward)
        if failure is not None:
            watch.outcome = "timed_out" if timed.cancelled_caught else "failed"
            counters.failed += 1
            log.warning("room %s: %s %s", self.id, envelope.event_type, failure, exc_info=raised)
            return False
        message_id = envelope.message_id
        if message_id is not None:
            shared.forwarded.add(message_id)
        counters.delivered += 1
        watch.outcome = "delivered"
        return True


async def _unwind(forward: Forward) -> NoReturn:
    """An aborted forward's scope is cancelled: its next checkpoint raises `Cancelled`,
    which the room's loop catches as the unit's end (and consumes, for an interrupt)."""
    await trio.lowlevel.checkpoint()
    raise AssertionError(f"the aborted forward {forward.control.message_id} was not cancelled")
