"""`run_asyncio`: asyncio code as part of a turn, stopped with it (issue 40, item 1).

Turns built by hand here (the rules of one piece: the loop, the cancel, the wait,
the grace); tests/integration/test_asyncio_turns.py runs them in an agent on the
embedded platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import sniffio
import trio

from band_trio.contract import (
    AsyncioLoop,
    Message,
    StopOutcome,
    Threads,
    Turn,
    TurnControl,
    current_turn,
    run_asyncio,
    turn_context,
)
from band_trio.errors import AsyncioCancelledError, NoTurnError
from support import NoPlatform

DEADLINE = 10
GRACE = 0.2
CORRELATION: contextvars.ContextVar[str] = contextvars.ContextVar("test_correlation")


def a_turn(threads: Threads, n: int = 1) -> Turn:
    message = Message(id=f"m{n}", room_id="r1", content="x", sender_id="u1", sender_type="User")
    control = TurnControl("r1", message.id, stop_grace=GRACE, threads=threads)
    return Turn(message, NoPlatform(), control=control)


def loop_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "band-trio asyncio"]


class Seen:
    """What the asyncio side saw, told back across the threads (under a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[str] = []

    def add(self, event: str) -> None:
        with self.lock:
            self.events.append(event)


async def test_the_result_comes_back_and_the_code_runs_on_an_asyncio_loop() -> None:
    threads = Threads(4)
    turn = a_turn(threads)
    CORRELATION.set("corr-1")

    async def work(a: int, b: int) -> tuple[int, str, str, str, str]:
        asyncio.get_running_loop()  # raises outside an asyncio loop
        await asyncio.sleep(0)
        library = sniffio.current_async_library()
        thread = threading.current_thread().name
        return a + b, library, CORRELATION.get(), current_turn().message.id, thread

    with trio.fail_after(DEADLINE), turn_context(turn):
        total, library, correlation, message_id, thread = await run_asyncio(work, 2, 3)
    assert (total, library, correlation, message_id) == (5, "asyncio", "corr-1", "m1")
    assert thread == "band-trio asyncio"
    assert turn.remote_stops == ()  # it finished: nothing to stop
    assert await threads.aclose(GRACE) == 0
    assert not loop_threads()


async def test_outside_a_turn_it_says_so() -> None:
    async def work() -> None:
        raise AssertionError("never run")

    with pytest.raises(NoTurnError, match="on_turn"):
        await run_asyncio(work)


async def test_an_abort_cancels_the_task_and_what_it_awaits_and_waits_for_them() -> None:
    threads = Threads(4)
    turn = a_turn(threads)
    seen = Seen()
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()

    async def inner(n: int) -> None:
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # cleanup that takes a while: the turn waits for it
            seen.add(f"inner {n} cleaned up")

    async def work() -> None:
        try:
            async with asyncio.TaskGroup() as group:  # a framework's own tasks
                group.create_task(inner(1))
                group.create_task(inner(2))
                token.run_sync_soon(started.set)
        finally:
            seen.add("outer cleaned up")

    with trio.fail_after(DEADLINE), turn_context(turn):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_asyncio, work)
                await started.wait()
                scope.cancel()
        assert scope.cancelled_caught
        cleaned = ["inner 1 cleaned up", "inner 2 cleaned up", "outer cleaned up"]
        assert sorted(seen.events) == cleaned
    (stop,) = turn.remote_stops
    assert (stop.name, stop.outcome) == ("asyncio task", StopOutcome.CONFIRMED)
    assert "ended after its cancel" in stop.detail
    assert threads.asyncio.stats.running == 0
    assert await threads.aclose(GRACE) == 0


async def test_its_exception_is_the_turns_failure_unchanged() -> None:
    threads = Threads(4)

    class Mine(Exception):
        pass

    async def work() -> None:
        await asyncio.sleep(0)
        raise Mine("from asyncio")

    with (
        trio.fail_after(DEADLINE),
        turn_context(a_turn(threads)),
        pytest.raises(Mine, match="from asyncio"),
    ):
        await run_asyncio(work)
    await threads.aclose(GRACE)


async def test_a_cancel_from_inside_asyncio_is_a_failure_not_the_turns_abort() -> None:
    threads = Threads(4)

    async def work() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_soon(task.cancel)  # a framework cancels itself
        await asyncio.sleep(60)

    async def timeout_escapes() -> None:
        raise asyncio.CancelledError("escaped an inner timeout")

    turn = a_turn(threads)
    with trio.fail_after(DEADLINE), turn_context(turn):
        with pytest.raises(AsyncioCancelledError, match="not by its turn"):
            await run_asyncio(work)
        with pytest.raises(AsyncioCancelledError, match="escaped an inner timeout"):
            await run_asyncio(timeout_escapes)
    assert not turn.aborted
    await threads.aclose(GRACE)


async def test_a_task_that_ignores_its_cancel_is_reported_then_cancelled_again_at_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    threads = Threads(4)
    turn = a_turn(threads)
    seen = Seen()
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()

    async def stubborn() -> str:
        token.run_sync_soon(started.set)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.add("first cancel swallowed")  # wrong, but it happens
        try:
            await asyncio.sleep(60)
        finally:
            seen.add("second cancel taken")
        return "too late"

    with trio.fail_after(DEADLINE), turn_context(turn):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_asyncio, stubborn)
                await started.wait()
                began = trio.current_time()
                scope.cancel()
        took = trio.current_time() - began
    assert GRACE - 0.01 <= took < GRACE + 1  # the turn waited its grace (its wait ends 1 ms early)
    (stop,) = turn.remote_stops
    assert stop.outcome is StopOutcome.UNCONFIRMED
    assert "ignored its cancel" in stop.detail
    stats = threads.asyncio.stats
    assert (stats.running, stats.overran, stats.overran_running) == (1, 1, 1)
    (overran,) = threads.asyncio.take_overruns()
    assert (overran.room_id, overran.message_id) == ("r1", "m1")
    assert overran.label.endswith("<locals>.stubborn")
    with caplog.at_level(logging.ERROR, "band_trio.asyncio"):
        assert await threads.aclose(GRACE) == 0  # the second cancel ended it
    assert seen.events == ["first cancel swallowed", "second cancel taken"]
    assert threads.asyncio.stats.overran_running == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # none outlived the close
    (warned,) = [r.getMessage() for r in caplog.records if r.name == "band_trio.remote"]
    assert "unconfirmed (the asyncio task ignored its cancel" in warned  # the log says so
    assert not loop_threads()


async def test_a_task_that_ignores_every_cancel_is_logged_at_close_and_the_thread_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    threads = Threads(4)
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()
    release = threading.Event()

    async def deaf() -> None:
        token.run_sync_soon(started.set)
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.01)

    with trio.fail_after(DEADLINE), turn_context(a_turn(threads)):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_asyncio, deaf)
                await started.wait()
                scope.cancel()
        with caplog.at_level(logging.ERROR, "band_trio.asyncio"):
            assert await threads.aclose(GRACE) == 1
    assert "ignored every cancel" in caplog.text
    assert "deaf" in caplog.text
    assert threads.asyncio.stats.overran_running == 0  # counted out: it never reports back
    release.set()
    assert not threads.asyncio.started


def test_a_loop_its_owner_never_closed_is_closed_when_the_trio_run_ends() -> None:
    seen = Seen()

    async def lingering() -> None:  # a framework's fire-and-forget task
        try:
            await asyncio.sleep(60)
        finally:
            seen.add("closed")

    async def work() -> str:
        asyncio.get_running_loop().create_task(lingering())
        await asyncio.sleep(0)
        return "done"

    async def main() -> str:
        turn = a_turn(Threads.default())
        with turn_context(turn):
            return await run_asyncio(work)

    assert trio.run(main) == "done"  # a library user's own trio.run
    assert seen.events == ["closed"]
    assert not loop_threads()


async def test_many_turns_share_one_loop_thread() -> None:
    threads = Threads(4)
    results: list[int] = []

    async def work(n: int) -> int:
        await asyncio.sleep(0.01)
        return n

    async def one(n: int) -> None:
        with turn_context(a_turn(threads, n)):
            results.append(await run_asyncio(work, n))

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            for n in range(100):
                nursery.start_soon(one, n)
            await trio.testing.wait_all_tasks_blocked()
            assert len(loop_threads()) == 1
    assert sorted(results) == list(range(100))
    await threads.aclose(GRACE)


async def test_a_plain_function_is_refused_clearly() -> None:
    threads = Threads(4)

    def not_async() -> int:
        return 1

    with (
        trio.fail_after(DEADLINE),
        turn_context(a_turn(threads)),
        pytest.raises(TypeError, match="needs an async function"),
    ):
        await run_asyncio(not_async)  # type: ignore[arg-type]
    await threads.aclose(GRACE)


async def test_awaited_from_the_asyncio_side_it_says_where_it_belongs() -> None:
    threads = Threads(4)

    async def nested() -> None:
        async def inner() -> None:
            pass

        await run_asyncio(inner)

    with (
        trio.fail_after(DEADLINE),
        turn_context(a_turn(threads)),
        pytest.raises(RuntimeError, match="from the turn's trio code"),
    ):
        await run_asyncio(nested)
    await threads.aclose(GRACE)


async def test_shielded_work_is_waited_for_and_reported_when_it_outlives_the_grace() -> None:
    threads = Threads(4)
    seen = Seen()
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()

    async def checkpoint_write() -> None:  # shielded on purpose: it must finish
        await asyncio.sleep(0.05)
        seen.add("checkpoint written")

    async def model_stream() -> None:  # shielded by mistake: it would run on
        try:
            await asyncio.sleep(60)
        finally:
            seen.add("stream closed")

    async def work(inner: Callable[[], Coroutine[Any, Any, None]]) -> None:
        task = asyncio.ensure_future(inner())
        token.run_sync_soon(started.set)
        await asyncio.shield(task)

    async def aborted(inner: Callable[[], Coroutine[Any, Any, None]], turn: Turn) -> float:
        nonlocal started
        started = trio.Event()
        with turn_context(turn), trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_asyncio, work, inner)
                await started.wait()
                began = trio.current_time()
                scope.cancel()
        return trio.current_time() - began

    with trio.fail_after(DEADLINE):
        quick = a_turn(threads, 1)
        await aborted(checkpoint_write, quick)
        assert seen.events == ["checkpoint written"]  # the turn waited for it, uncut
        assert [s.outcome for s in quick.remote_stops] == [StopOutcome.CONFIRMED]
        slow = a_turn(threads, 2)
        took = await aborted(model_stream, slow)
        assert GRACE - 0.01 <= took < GRACE + 1
        (stop,) = slow.remote_stops
        assert stop.outcome is StopOutcome.UNCONFIRMED
        assert "a task the asyncio task started still runs" in stop.detail
        assert threads.asyncio.stats.overran_running == 1
        assert await threads.aclose(GRACE) == 0  # the close cancels it
    assert seen.events == ["checkpoint written", "stream closed"]
    assert threads.asyncio.stats.overran_running == 0


async def test_an_abort_before_the_code_began_still_reaches_its_own_try() -> None:
    """The turn counts the asyncio work as started once its code runs, so a cancel is
    never thrown into a coroutine that has not begun (it would skip the code's own
    `try`, and a swallowing adapter would look like one that stops)."""
    threads = Threads(4)
    turn = a_turn(threads)
    seen = Seen()

    async def work() -> None:
        seen.add("entered")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen.add("its own except")
            raise

    with trio.fail_after(DEADLINE), turn_context(turn), trio.CancelScope() as scope:
        scope.cancel()  # aborted before the call is even made
        await run_asyncio(work)
    assert seen.events == ["entered", "its own except"]
    (stop,) = turn.remote_stops
    assert stop.outcome is StopOutcome.CONFIRMED
    await threads.aclose(GRACE)


async def test_an_owner_that_closes_its_loop_leaves_no_task_behind() -> None:
    threads = Threads(4)

    async def work() -> int:
        return 1

    def closers() -> list[str]:
        root = trio.lowlevel.current_root_task()
        tasks = [t for n in root.child_nurseries for t in n.child_tasks]
        return [t.name for t in tasks if "close at the run's end" in t.name]

    with trio.fail_after(DEADLINE):
        for n in range(3):  # an agent run three times in one trio run
            with turn_context(a_turn(threads, n)):
                assert await run_asyncio(work) == 1
            assert len(closers()) == 1
            await threads.aclose(GRACE)
            await trio.testing.wait_all_tasks_blocked()
            assert closers() == []


async def test_a_loop_blocked_by_synchronous_code_does_not_hold_its_owner(
    caplog: pytest.LogCaptureFixture,
) -> None:
    threads = Threads(4)
    blocked = threading.Event()
    release = threading.Event()
    token = trio.lowlevel.current_trio_token()
    started = trio.Event()

    async def blocks_the_loop() -> None:
        token.run_sync_soon(started.set)
        blocked.set()
        release.wait(DEADLINE)  # synchronous: the whole asyncio loop stands still

    with trio.fail_after(DEADLINE), turn_context(a_turn(threads)):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_asyncio, blocks_the_loop)
                await started.wait()
                scope.cancel()  # the cancel cannot reach it: the turn waits its grace
        began = trio.current_time()
        with caplog.at_level(logging.ERROR, "band_trio.asyncio"):
            assert await threads.aclose(GRACE) == 1
        took = trio.current_time() - began
    release.set()
    assert took < 2 * GRACE + 1.5  # bounded: the owner goes on
    assert "still busy" in caplog.text  # and says why


async def test_a_connection_kept_alive_on_the_loop_is_closed_with_it() -> None:
    """An HTTP client keeps its connection alive past the call (langchain-openai shares
    one per process): the loop's close closes it, so no socket outlives the owner."""
    threads = Threads(4)
    kept: list[asyncio.StreamWriter] = []
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]

    async def connect() -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        kept.append(writer)  # kept alive for a later call

    with trio.fail_after(DEADLINE), turn_context(a_turn(threads)):
        async with listener:
            await run_asyncio(connect)
            server_side = await listener.accept()
            await threads.aclose(GRACE)
            assert await server_side.receive_some() == b""  # the client side closed
            await server_side.aclose()
    sock = kept[0].get_extra_info("socket")
    assert sock is None or sock.fileno() == -1


async def test_a_cancel_after_the_task_ended_still_settles_at_once() -> None:
    """The abort and the task's end can cross: the stop finds the task running, and by
    its cancel the task has ended. The stop then waits for the job's family to settle,
    which must come at once, not at the grace (a false overrun)."""
    loop = AsyncioLoop()

    async def quick() -> int:
        return 1

    with trio.fail_after(DEADLINE):
        job = loop.submit(quick, (), contextvars.copy_context(), "quick")
        await job.wait()
        job.cancel()
        with trio.fail_after(1):
            await job.wait_settled()
    assert await loop.aclose(GRACE) == 0
