"""`Cutoff.queued`: a grace that counts from `Grace.start` (a mark's connection), the
wait before it bounded by `wait`, and all of it by the cutoff (docs/discussion/closing.md)."""

from __future__ import annotations

import math

import trio

from band_trio.contract import Cutoff


async def test_a_wait_in_the_queue_is_bounded_by_wait(autojump_clock: object) -> None:
    with Cutoff().queued(1.0, wait=3.0) as grace:
        await trio.sleep(10)  # never got a connection
    assert grace.scope.cancelled_caught and trio.current_time() == 3.0


async def test_the_grace_counts_from_start_not_from_the_queue(autojump_clock: object) -> None:
    with Cutoff().queued(1.0, wait=3.0) as grace:
        await trio.sleep(2.5)  # the queue took most of the wait ...
        grace.start()
        await trio.sleep(0.9)  # ... and the work still gets its whole grace
        grace.start()  # a retry's next connection does not renew it
        await trio.sleep(10)
    assert grace.scope.cancelled_caught and trio.current_time() == 3.5


async def test_the_cutoff_bounds_a_grace_started_after_the_cut(autojump_clock: object) -> None:
    cutoff = Cutoff()
    with cutoff.queued(5.0, wait=10.0) as grace:
        cutoff.cut(trio.current_time() + 0.2)  # the hard stop, while it waits
        await trio.sleep(0.1)
        grace.start()  # a connection at last: the grace may not outlast the cutoff
        await trio.sleep(10)
    assert grace.scope.cancelled_caught and trio.current_time() == 0.2


async def test_requeue_bounds_the_next_step_by_wait_again(autojump_clock: object) -> None:
    with Cutoff().queued(1.0, wait=3.0) as grace:
        grace.start()
        await trio.sleep(0.5)
        grace.requeue()  # the mark is answered; `working: false` queues in its turn
        assert not grace.started and grace.scope.deadline == 3.5
        await trio.sleep(2.9)  # within the new wait
        grace.start()
        await trio.sleep(10)
    assert grace.scope.cancelled_caught and math.isclose(trio.current_time(), 4.4)


async def test_a_scope_that_ended_is_not_revived(autojump_clock: object) -> None:
    with Cutoff().queued(1.0, wait=1.0) as grace:
        grace.scope.cancel()
        grace.start()
        grace.requeue()
        await trio.sleep(10)
    assert grace.scope.cancelled_caught and trio.current_time() == 0.0
