"""What a signal wakes: the cancel of an interrupt or a stop reaches the adapter's task and
no other. Every task woken beside it runs in the same scheduling round, in an order trio
shuffles, so each one is time the adapter may wait for (docs/benchmarks.md: the abort
watchdog, when the abort woke it, ran ahead of the adapter half the time)."""

from __future__ import annotations

import pytest
import trio

from band_trio import Turn
from band_trio.link import RestClient
from band_trio.platform import Platform
from band_trio.runtime import _turn_state
from support import Recorder, running_agent, status

DEADLINE = 10


class Woken(trio.abc.Instrument):
    """The tasks made runnable while `recording` is set."""

    def __init__(self) -> None:
        self.recording = False
        self.tasks: list[trio.lowlevel.Task] = []

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        if self.recording:
            self.tasks.append(task)


@pytest.mark.parametrize("mode", ["interrupt", "stop"])
async def test_an_abort_wakes_the_adapters_task_alone(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()
    adapter_task: list[trio.lowlevel.Task] = []

    async def hold(turn: Turn) -> None:
        adapter_task.append(trio.lowlevel.current_task())
        entered.set()
        await trio.sleep_forever()

    woken = Woken()
    original = _turn_state.ActiveTurn.abort

    def recorded(self: _turn_state.ActiveTurn, *args: object, **kwargs: object) -> bool:
        woken.recording = True
        try:
            return original(self, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            woken.recording = False

    monkeypatch.setattr(_turn_state.ActiveTurn, "abort", recorded)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(hold)):
            message = platform.post_message(info.room_id, info.user_id, "held")
            await entered.wait()
            await trio.testing.wait_all_tasks_blocked()  # the keep-alive is parked too
            trio.lowlevel.add_instrument(woken)
            try:
                platform.send_control(info.agent_id, mode, room_id=info.room_id)  # type: ignore[arg-type]
                want = "processed" if mode == "interrupt" else "processing"
                await platform.wait_until(lambda: woken.tasks and status(platform, message) == want)
            finally:
                trio.lowlevel.remove_instrument(woken)
    assert woken.tasks == adapter_task


@pytest.mark.parametrize("mode", ["interrupt", "stop"])
async def test_working_false_leaves_from_the_turns_own_task(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """After an abort, `working: false` is sent by the task that ran the adapter: no task
    is spawned for it, so no scheduling round (and no other task woken meanwhile, such as
    the room's watchdog) comes between the settle and the request. A stop sends nothing
    else; an interrupt sends it after the mark."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()
    adapter_task: list[trio.lowlevel.Task] = []
    reporters: list[trio.lowlevel.Task] = []

    async def hold(turn: Turn) -> None:
        adapter_task.append(trio.lowlevel.current_task())
        entered.set()
        await trio.sleep_forever()

    original = RestClient.report_activity

    async def recorded(self: RestClient, room_id: str, working: bool) -> bool:
        if not working:
            reporters.append(trio.lowlevel.current_task())
        return await original(self, room_id, working)

    monkeypatch.setattr(RestClient, "report_activity", recorded)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(hold)):
            message = platform.post_message(info.room_id, info.user_id, "held")
            await entered.wait()
            platform.send_control(info.agent_id, mode, room_id=info.room_id)  # type: ignore[arg-type]
            want = "processed" if mode == "interrupt" else "processing"
            await platform.wait_until(lambda: reporters and status(platform, message) == want)
    assert reporters == adapter_task
