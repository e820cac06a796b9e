"""`Lanes`, the REST client's gate: a bounded number in flight, urgent waiters first,
and a waiter cancelled before its turn holds no slot."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from band_trio.link._lanes import Lanes


async def test_at_most_capacity_in_flight_and_urgent_waiters_go_first() -> None:
    lanes = Lanes(2)
    order: list[str] = []
    peak = 0
    gate = trio.Event()

    async def request(name: str, urgent: bool) -> None:
        nonlocal peak
        await lanes.acquire(urgent=urgent)
        try:
            peak = max(peak, lanes.in_flight)
            order.append(name)
            await gate.wait()
        finally:
            lanes.release()

    async with trio.open_nursery() as nursery:
        for name in ("a", "b", "c", "d"):  # a, b hold the slots; c, d wait
            nursery.start_soon(request, name, False)
            await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, "mark1", True)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, "mark2", True)
        await trio.testing.wait_all_tasks_blocked()
        assert lanes.waiting == (2, 2)
        gate.set()
    # a slot freed goes to an urgent waiter while there is one (two slots free at
    # once: trio runs the two woken waiters in either order)
    assert order[:2] == ["a", "b"]
    assert sorted(order[2:4]) == ["mark1", "mark2"]
    assert sorted(order[4:]) == ["c", "d"]
    assert peak == 2
    assert lanes.in_flight == 0 and lanes.waiting == (0, 0)


async def test_a_waiter_cancelled_before_its_turn_holds_no_slot() -> None:
    lanes = Lanes(1)
    await lanes.acquire(urgent=False)
    with trio.move_on_after(0.01):
        await lanes.acquire(urgent=True)
    assert lanes.waiting == (0, 0)
    lanes.release()
    assert lanes.in_flight == 0
    with trio.fail_after(1):
        await lanes.acquire(urgent=False)  # the slot is free again, not lost
    assert lanes.in_flight == 1


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Lanes(0)
