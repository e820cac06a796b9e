"""The room's queue on its own (unit tests: a fake target and a fake REST client, the
autojump clock — no sockets, and time is not the subject)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from band_trio import Policy
from band_trio.bridge import BridgePolicy, Envelope
from band_trio.bridge._envelope import envelope_for
from band_trio.bridge._room import ForwardRoom
from band_trio.bridge._shared import Forwarded, Shared
from band_trio.contract import Turn
from band_trio.errors import ForwardError
from band_trio.runtime._parts import Changes
from band_trio.wire import ChatMessage, ContextMeta, MessageCreated, MessagePage

ROOM = "room-1"
AGENT = "agent-1"


def _wire(message_id: str) -> MessageCreated:
    return MessageCreated(
        id=message_id,
        content=f"text of {message_id}",
        message_type="text",
        sender_type="User",
        sender_id="user-1",
        inserted_at="2026-12-01T00:00:00Z",
        updated_at="2026-12-01T00:00:00Z",
    )


def _envelope(message_id: str) -> Envelope:
    return envelope_for("message_created", AGENT, ROOM, _wire(message_id))


class _Target:
    """Records what it is given; `block` holds each forward until `release()`;
    `fail` makes the next forwards raise `ForwardError`."""

    def __init__(self) -> None:
        self.started: list[str | None] = []
        self.taken: list[str | None] = []
        self.block = False
        self.fail = 0
        self._release = trio.Event()
        self.changes = Changes()

    def release(self) -> None:
        self.block = False
        self._release.set()

    async def forward(self, envelope: Envelope, turn: Turn) -> None:
        self.started.append(envelope.message_id)
        self.changes.notify()
        if self.fail:
            self.fail -= 1
            raise ForwardError("failed on purpose")
        if self.block:
            await self._release.wait()
        self.taken.append(envelope.message_id)
        self.changes.notify()

    async def interrupted(self, envelope: Envelope) -> bool | None:
        return None  # consumes nothing: the room marks it


class _Rest:
    """`next_message` answers from a queue of ids (None: 204), each call counted."""

    def __init__(self) -> None:
        self.answers: deque[str | None] = deque()
        self.calls = 0
        self.scans = 0
        self.marked: list[str] = []
        self.endless = False
        """`unprocessed` answers `has_more` for ever, always with the same cursor."""
        self.hold_from: int | None = None
        """From this call on, `next_message` waits until cancelled."""
        self.held = trio.Event()

    async def mark_processed(
        self, room_id: str, message_id: str, *, on_slot: Callable[[], None] | None = None
    ) -> object:
        if on_slot is not None:
            on_slot()
        await trio.lowlevel.checkpoint()
        self.marked.append(message_id)
        return object()

    async def unprocessed(self, room_id: str, cursor: str | None = None) -> MessagePage:
        """The room's unprocessed list: empty (what `/next` answers is all there is)."""
        self.scans += 1
        await trio.lowlevel.checkpoint()
        if self.endless:
            meta = ContextMeta(has_more=True, limit=100, next_cursor="7")
            return MessagePage(data=[], metadata=meta)
        return MessagePage(data=[], metadata=ContextMeta(has_more=False, limit=100))

    async def next_message(self, room_id: str) -> ChatMessage | None:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        if self.hold_from is not None and self.calls >= self.hold_from:
            self.held.set()
            await trio.sleep_forever()
        message_id = self.answers.popleft() if self.answers else None
        if message_id is None:
            return None
        return ChatMessage(
            id=message_id, content="c", message_type="text", sender_id="user-1", sender_type="User"
        )


def _shared(target: _Target, rest: _Rest, limit: int = 32) -> Shared:
    rest_any: Any = rest
    return Shared(
        agent_id=AGENT,
        rest=rest_any,
        target=target,
        limiter=trio.CapacityLimiter(limit),
        policy=Policy(),
        bridge_policy=BridgePolicy(),
        changes=Changes(),
        forwarded=Forwarded(100),
        given_up=Forwarded(100),
        settles=False,  # the fake REST client claims nothing (the settle: test_settle.py)
    )


async def _until(shared: Shared, predicate: Any) -> None:
    while not predicate():
        await shared.changes.wait()


@asynccontextmanager
async def _one_room() -> AsyncIterator[tuple[_Target, _Rest, Shared, ForwardRoom]]:
    target, rest = _Target(), _Rest()
    shared = _shared(target, rest)
    room = ForwardRoom(ROOM, shared)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(room.run)
        yield target, rest, shared, room
        nursery.cancel_scope.cancel()


async def test_an_interrupt_with_nothing_running_arms_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with _one_room() as (target, _rest, shared, room):
        assert room.interrupt("nothing to interrupt") is False
        room.offer(_envelope("m1"))
        await _until(shared, lambda: room.idle)
        assert target.taken == ["m1"] and shared.counters.cancelled == 0


async def test_a_copy_in_flight_is_dropped_and_a_copy_after_a_failure_is_forwarded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with _one_room() as (target, _rest, shared, room):
        target.block = True
        room.offer(_envelope("m1"))
        await _until(shared, lambda: room.running is not None and target.started)
        room.offer(_envelope("m1"))  # a redelivery while it is in flight
        assert room.queued == 0
        target.release()
        await _until(shared, lambda: room.idle)
        room.offer(_envelope("m1"))  # after it was delivered: never again
        assert room.queued == 0
        target.fail = 1
        room.offer(_envelope("m2"))
        await _until(shared, lambda: room.idle and shared.counters.failed == 1)
        room.offer(_envelope("m2"))  # not remembered: forwarded again
        await _until(shared, lambda: room.idle and "m2" in target.taken)
        assert target.taken == ["m1", "m2"]


async def test_while_stopped_pushed_messages_wait_for_plays_single_catch_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with _one_room() as (target, rest, shared, room):
        room.stop("stopped")
        room.offer(_envelope("m1"))
        assert room.queued == 0  # left for /next
        rest.answers.extend(["m1", "m1"])  # a dumb target: /next keeps answering the oldest
        for _ in range(3):
            room.play()
        assert room.queued == 1  # one catch-up, not three
        await _until(shared, lambda: room.idle and rest.calls == 2)
        # the second answer was forwarded already: the pass walks the room's unprocessed
        # list past it (empty here) and ends, rather than stopping at the head
        assert target.taken == ["m1"] and rest.scans == 1
        assert shared.counters.nudges == 1


async def test_a_scan_whose_cursor_never_moves_ends_at_the_repeat(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A platform that answers `has_more` for ever with one cursor: the catch-up's walk
    past a forwarded head stops at the repeated cursor (it asked for ever before)."""
    async with _one_room() as (target, rest, shared, room):
        rest.endless = True
        room.offer(_envelope("m1"))
        await _until(shared, lambda: room.idle)
        rest.answers.extend(["m1"])  # /next serves the forwarded head again
        room.play()
        await _until(shared, lambda: room.idle and rest.calls == 1)
        assert target.taken == ["m1"]
        assert rest.scans == 2  # the first page, and the one whose cursor repeated


async def test_a_forward_waiting_for_the_cap_is_cancelled_without_reaching_the_target(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target, rest = _Target(), _Rest()
    shared = _shared(target, rest, limit=1)
    first, second = ForwardRoom("a", shared), ForwardRoom("b", shared)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(first.run)
        nursery.start_soon(second.run)
        target.block = True
        first.offer(envelope_for("message_created", AGENT, "a", _wire("m1")))
        await _until(shared, lambda: target.started == ["m1"])
        second.offer(envelope_for("message_created", AGENT, "b", _wire("m2")))
        await _until(shared, lambda: second.running is not None)
        await trio.testing.wait_all_tasks_blocked()
        assert second.interrupt("while it waits for the cap")
        await _until(shared, lambda: second.idle)
        target.release()
        await _until(shared, lambda: first.idle)
        nursery.cancel_scope.cancel()
    assert target.started == ["m1"] and target.taken == ["m1"]
    assert rest.marked == ["m2"]  # the interrupt consumed what it cut off
    assert "m2" in shared.forwarded


async def test_a_forward_past_its_deadline_is_a_failed_forward(
    autojump_clock: trio.testing.MockClock,
) -> None:
    target, rest = _Target(), _Rest()
    shared = _shared(target, rest)
    shared.bridge_policy = BridgePolicy(forward_deadline=30.0)
    room = ForwardRoom(ROOM, shared)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(room.run)
        target.block = True
        room.offer(_envelope("m1"))
        await _until(shared, lambda: shared.counters.failed == 1)
        assert trio.current_time() >= 30.0 and "m1" not in shared.forwarded
        nursery.cancel_scope.cancel()


async def test_an_interrupt_after_a_catch_up_forwarded_a_message_consumes_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The catch-up forwarded m1 and is in its next `/next` when the interrupt lands:
    m1 was delivered, not cut off, so it is not marked."""
    async with _one_room() as (target, rest, shared, room):
        rest.answers.append("m1")
        rest.hold_from = 2
        room.play()
        await rest.held.wait()
        assert target.taken == ["m1"]
        assert room.interrupt("during the second /next")
        await _until(shared, lambda: room.idle)
    assert rest.marked == []


async def test_a_target_that_raises_something_else_is_a_failed_forward(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A target's bug (not a `ForwardError`) fails that forward, not the room."""
    async with _one_room() as (target, _, shared, room):

        async def broken(envelope: Envelope, turn: Turn) -> None:
            raise KeyError("a bug in the target")

        target.forward = broken  # type: ignore[method-assign]
        room.offer(_envelope("m1"))
        await _until(shared, lambda: shared.counters.failed == 1 and room.idle)
        del target.forward
        room.offer(_envelope("m2"))
        await _until(shared, lambda: target.taken == ["m2"])
