"""No task outlives its turn: a room that has answered many messages holds what it held
after the first (each turn's abort watchdog and activity keep-alive end with it)."""

from __future__ import annotations

import trio
import trio.testing

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, running_agent, status

DEADLINE = 20.0


async def _answer(turn: Turn) -> None:
    await turn.reply("ok")


async def test_finished_turns_leave_no_task_behind(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(_answer)) as running:
            first = platform.post_message(info.room_id, info.user_id, "first")
            await platform.wait_until(lambda: status(platform, first) == "processed")
            await platform.wait_until(lambda: not any(platform.working.values()))
            await trio.testing.wait_all_tasks_blocked(0.01)
            baseline = len(running.tasks.living)
            for i in range(6):
                message = platform.post_message(info.room_id, info.user_id, f"more {i}")
                await platform.wait_until(lambda m=message: status(platform, m) == "processed")
            await platform.wait_until(lambda: not any(platform.working.values()))
            await trio.testing.wait_all_tasks_blocked(0.01)  # every turn's tasks have ended
            assert len(running.tasks.living) <= baseline, sorted(
                t.name for t in running.tasks.living
            )


async def test_aborted_turns_leave_no_task_behind(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()

    async def hold(turn: Turn) -> None:
        if turn.message.content == "quick":
            await turn.reply("ok")
            return
        entered.set()
        await trio.sleep_forever()

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(hold)) as running:
            first = platform.post_message(info.room_id, info.user_id, "quick")
            await platform.wait_until(lambda: status(platform, first) == "processed")
            await platform.wait_until(lambda: not any(platform.working.values()))
            await trio.testing.wait_all_tasks_blocked(0.01)
            baseline = len(running.tasks.living)
            for _ in range(4):
                entered = trio.Event()
                message = platform.post_message(info.room_id, info.user_id, "hold")
                await entered.wait()
                platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
                await platform.wait_until(lambda m=message: status(platform, m) == "processed")
            await platform.wait_until(lambda: not any(platform.working.values()))
            await trio.testing.wait_all_tasks_blocked(0.01)
            assert len(running.tasks.living) <= baseline, sorted(
                t.name for t in running.tasks.living
            )


async def test_a_mark_cut_off_by_the_cleanup_grace_is_retried_soon(platform: Platform) -> None:
    """1,000 turns interrupted at once queue 2,000 requests at the client: some marks
    cannot go out within `cleanup_grace`. The message is then ack-pending (never run
    again) and its mark must be retried within about a grace, not at the next
    reconcile a minute later. Here the first mark is answered 503 with a long
    Retry-After, so the settle's grace ends first."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()

    async def hold(turn: Turn) -> None:
        entered.set()
        await trio.sleep_forever()

    policy = Policy(cleanup_grace=0.2, reconcile_interval=600, reconcile_interval_max=600)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(hold), policy=policy):
            message = platform.post_message(info.room_id, info.user_id, "hold")
            await entered.wait()
            platform.faults.fail_rest("processed", 503, retry_after=5)
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            with trio.fail_after(3):  # a few graces, far less than the reconcile
                await platform.wait_until(lambda: status(platform, message) == "processed")
