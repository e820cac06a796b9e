"""`run_in_thread` uses threads of its own, sized by `Policy.adapter_threads`, and counts
the ones it abandons (issue 21, item 4).

trio's shared thread limiter (40 tokens) also serves `getaddrinfo` and a
subprocess's spawn, and an abandoned thread keeps its token until its call
returns: before, 40 aborted turns left every name lookup waiting (over 2 s
measured), and `run_command`'s spawn inside a shielded start with it.
"""

from __future__ import annotations

import threading

import trio

from band_trio import Policy
from band_trio.contract import (
    Message,
    Threads,
    ThreadStats,
    Turn,
    TurnControl,
    run_in_thread,
)
from band_trio.platform import Platform
from support import NoPlatform, Recorder, running_agent, seeded, status

DEADLINE = 10


def a_turn(n: int, threads: Threads | None = None) -> tuple[Turn, TurnControl]:
    message = Message(id=f"m{n}", room_id="r1", content="x", sender_id="u1", sender_type="User")
    control = TurnControl("r1", message.id, stop_grace=0.2, threads=threads)
    return Turn(message, NoPlatform(), control=control), control


def dispatched(threads: Threads | None) -> int:
    """Calls handed to a worker thread so far: the tokens borrowed from trio's shared
    limiter and from the owner's own."""
    own = (threads or Threads.default())._limiters()[0]
    shared = trio.to_thread.current_default_thread_limiter()
    return int(own.statistics().borrowed_tokens + shared.statistics().borrowed_tokens)


class Blocked:
    """Turns blocked in `run_in_thread` until `release`; `entered` counts the calls that
    got a thread (told to trio by each thread itself)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = 0
        self._changed = trio.Event()

    def _entered(self) -> None:
        self.entered += 1
        self._changed.set()
        self._changed = trio.Event()

    def blocking(self) -> None:
        trio.from_thread.run_sync(self._entered)
        self.release.wait(DEADLINE)

    async def until_entered(self, count: int) -> None:
        while self.entered < count:
            await self._changed.wait()

    async def abort(self, count: int, threads: Threads | None, entered: int = 0) -> None:
        """`count` turns in threads, aborted once `entered` calls got one."""

        async def one(n: int, scope: trio.CancelScope) -> None:
            turn, _ = a_turn(n, threads)
            with scope:
                await run_in_thread(turn, self.blocking)

        scopes = [trio.CancelScope() for _ in range(count)]
        async with trio.open_nursery() as nursery:
            for n, scope in enumerate(scopes):
                nursery.start_soon(one, n, scope)
            await self.until_entered(entered)
            await trio.testing.wait_all_tasks_blocked()
            # every call that got a thread (from whichever limiter) is in its blocking
            # call before the abort: an abort before that would skip the call instead
            await self.until_entered(dispatched(threads))
            for scope in scopes:
                scope.cancel()  # the turn's abort: the thread is abandoned


async def test_forty_aborted_threads_leave_name_lookups_unblocked() -> None:
    blocked = Blocked()
    try:
        with trio.fail_after(DEADLINE):
            await blocked.abort(40, None)
        with trio.fail_after(5):  # before: waited for a thread token until the release
            await trio.socket.getaddrinfo("localhost", 80)
    finally:
        blocked.release.set()


async def test_the_threads_are_sized_by_the_policy_and_the_abandoned_ones_counted() -> None:
    threads = Threads(3)
    blocked = Blocked()
    try:
        with trio.fail_after(DEADLINE):
            await blocked.abort(5, threads, entered=3)  # the other two wait for a slot
        assert blocked.entered == 3  # those two were cancelled while waiting
        stats = threads.stats
        assert (stats.limit, stats.abandoned, stats.abandoned_running) == (3, 3, 3)
    finally:
        blocked.release.set()
    with trio.fail_after(DEADLINE):
        await threads.wait_idle()  # each returns once released, its result discarded
    assert (threads.stats.running, threads.stats.abandoned_running) == (0, 0)


def test_the_policy_sizes_the_threads() -> None:
    assert Policy().adapter_threads >= 1
    assert Threads(Policy(adapter_threads=7).adapter_threads).stats.limit == 7


async def test_the_agent_counts_a_thread_its_interrupt_abandoned(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    blocked = Blocked()

    async def behaviour(turn: Turn) -> None:
        await run_in_thread(turn, blocked.blocking)

    try:
        with trio.fail_after(DEADLINE):
            async with running_agent(
                platform, Recorder(behaviour), policy=Policy(adapter_threads=4)
            ) as running:
                agent = running.agent
                message = platform.post_message(room, user, "block")
                await blocked.until_entered(1)
                assert agent.threads == ThreadStats(4, 1, 0, 0)
                platform.send_control(agent_id, "interrupt", room_id=room)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                assert agent.threads == ThreadStats(4, 1, 1, 1)  # abandoned, still running
                blocked.release.set()
                while agent.threads.running:
                    await agent._threads.wait_idle()
                assert agent.threads == ThreadStats(4, 0, 1, 0)
    finally:
        blocked.release.set()
