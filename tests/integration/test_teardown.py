"""A graceful stop at scale: every mark sent, and the topics left by one close of the socket.

Closing the websocket leaves every topic of the connection at once (the
platform forgets a closed connection's joins: docs/reference/platform.md), so
a stopping agent does not leave its rooms' topics one by one, awaiting a reply
for each (20,000 round trips at 10,000 rooms). A room left while the agent
runs still leaves its topics (tests/integration/test_rooms.py).
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest
import trio
import trio.testing

from band_trio import Adapter, Policy, Turn
from band_trio.contract import Cutoff
from band_trio.platform import Platform
from band_trio.runtime._room import Room
from band_trio.testing import TaskTracker
from support import Recorder, Running, rooms_with_the_agent, running_agent, status

DEADLINE = 10


def frames_since(platform: Platform, position: int, needle: str) -> list[str]:
    return [
        entry.frame
        for entry in platform.log(position)
        if entry.kind == "ws_in" and entry.frame and needle in entry.frame
    ]


async def test_a_graceful_stop_marks_every_turn_and_leaves_with_one_close(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.user_id and info.agent_id
    rooms = rooms_with_the_agent(platform, 6)
    release = trio.Event()

    async def finish_when_released(turn: Turn) -> None:
        await release.wait()
        await turn.reply(f"done: {turn.message.content}")

    adapter = Recorder(finish_when_released)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(shutdown_grace=8)) as running:
            posted = [platform.post_message(room, info.user_id, f"in {room}") for room in rooms[:3]]
            await adapter.wait_for(lambda: len(adapter.calls) == 3)
            position = platform.request_log.next_seq
            release.set()  # the turns end during the stop's grace (running_agent stops now)
    assert running.stop_result is not None and running.stop_result.graceful
    assert [status(platform, m) for m in posted] == ["processed"] * 3  # nothing unmarked
    assert frames_since(platform, position, '"phx_leave"') == []  # no leave per topic
    closes = [e for e in platform.log(position) if e.kind == "ws_close"]
    assert [e.agent_id for e in closes] == [info.agent_id]  # one close of the one socket
    assert info.agent_id not in platform.connected_agents()  # every join forgotten with it
    assert sorted(adapter.left) == sorted(rooms)  # the adapter is still told of each room


class Idle(Adapter):
    """An adapter with no `on_room_left` of its own (the base one does nothing)."""

    async def on_turn(self, turn: Turn) -> None:
        await turn.reply("done")


class Steps(trio.abc.Instrument):
    """Scheduling steps taken by the tasks `tracker` follows, while `recording`."""

    def __init__(self, tracker: TaskTracker) -> None:
        self.tracker = tracker
        self.recording = False
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.recording and (task in self.tracker.living or task is self.tracker.root):
            self.steps += 1


async def idle_agent_synced(platform: Platform, running: Running, rooms: int) -> None:
    """Until every room has had its first `/next` and every task is parked."""
    agent_id = platform.info.agent_id

    def synced() -> bool:
        return (
            sum(
                1
                for e in platform.log(0)
                if e.kind == "rest" and e.agent_id == agent_id and (e.path or "").endswith("/next")
            )
            >= rooms
        )

    await platform.wait_until(synced)
    await running.agent.wait_until(lambda: all(v.joined for v in running.agent.rooms.values()))
    await trio.testing.wait_all_tasks_blocked()


ROOMS = 40


async def test_an_idle_room_holds_one_task_and_its_teardown_no_shielded_scope(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle room (no turn, nothing to mark, its topics left by the socket's close, an
    adapter with no `on_room_left`) costs one task, and its teardown opens no shielded
    scope (at 10,000 rooms each one was a deadline registered and removed, a context
    manager and the hook's own bounded scope: docs/benchmarks.md, the scale rows) and
    makes no REST call."""
    rooms_with_the_agent(platform, ROOMS)
    shielded: list[float] = []
    original = Cutoff.shielded

    def counted(self: Cutoff, deadline: float) -> AbstractContextManager[trio.CancelScope]:
        shielded.append(deadline)
        return original(self, deadline)

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Idle()) as running:
            await idle_agent_synced(platform, running, ROOMS)
            tasks = len(running.tasks.living)
            assert tasks <= ROOMS + 20, f"{tasks} tasks for {ROOMS} idle rooms"
            assert Room.__dictoffset__ == 0  # and no instance dict per room (`__slots__`)
            position = platform.request_log.next_seq
            monkeypatch.setattr(Cutoff, "shielded", counted)
            result = await running.agent.stop()
    assert result.graceful
    assert shielded == []
    assert [e for e in platform.log(position) if e.kind == "rest"] == []
    assert frames_since(platform, position, '"phx_leave"') == []


async def test_an_idle_rooms_teardown_cancels_nothing(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drain wakes an idle room (parked for work) rather than cancelling its search:
    no `Cancelled` raised, caught and unwound per room (nor its traceback left for the
    collector), and a room nursery with no task in it is not cancelled on the way out."""
    rooms_with_the_agent(platform, ROOMS)
    cancels: list[trio.CancelScope] = []
    original = trio.CancelScope.cancel

    def counted(self: trio.CancelScope, reason: str | None = None) -> None:
        cancels.append(self)
        original(self, reason)

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Idle()) as running:
            await idle_agent_synced(platform, running, ROOMS)
            monkeypatch.setattr(trio.CancelScope, "cancel", counted)
            result = await running.agent.stop()
    assert result.graceful
    assert len(cancels) < 20, f"{len(cancels)} cancels to stop {ROOMS} idle rooms"


async def test_an_idle_rooms_teardown_takes_at_most_two_scheduling_steps(
    platform: Platform,
) -> None:
    """Per idle room, the teardown wakes its task once (the drain's cancel) and the
    room's nursery exit takes one schedule point: nothing else steps per room."""
    rooms_with_the_agent(platform, ROOMS)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Idle()) as running:
            steps = Steps(running.tasks)
            trio.lowlevel.add_instrument(steps)
            try:
                await idle_agent_synced(platform, running, ROOMS)
                steps.recording = True
                result = await running.agent.stop()
            finally:
                trio.lowlevel.remove_instrument(steps)
    assert result.graceful
    assert steps.steps <= 2 * ROOMS + 40, f"{steps.steps} steps to stop {ROOMS} idle rooms"


async def test_an_idle_room_left_at_run_time_still_leaves_its_topics(platform: Platform) -> None:
    """Only the shutdown skips an idle room's close: a room left while the agent runs
    leaves its two topics (the socket stays open), hook or no hook."""
    info = platform.info
    assert info.agent_id and info.room_id
    rooms_with_the_agent(platform, 2)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Idle()) as running:
            await idle_agent_synced(platform, running, 2)
            position = platform.request_log.next_seq
            platform.remove_participant(info.room_id, info.agent_id)

            def left() -> list[str]:
                return frames_since(platform, position, '"phx_leave"')

            await platform.wait_until(lambda: len(left()) == 2)
            assert all(info.room_id in frame for frame in left())
            assert info.room_id not in running.agent.rooms
