"""What a signal wakes: the cancel of an interrupt or a stop reaches the adapter's task and
no other. Every task woken beside it runs in the same scheduling round, in an order trio
shuffles, so each one is time the adapter may wait for (docs/benchmarks.md: the abort
watchdog, when the abort woke it, ran ahead of the adapter half the time)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from band_trio import Turn
from band_trio.link import RestClient
from band_trio.platform import Platform
from band_trio.runtime import _turn_state
from support import Recorder, rooms_with_the_agent, running_agent, status

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

    async def recorded(self: RestClient, room_id: str, working: bool, **kw: Any) -> bool:
        if not working:
            reporters.append(trio.lowlevel.current_task())
        return await original(self, room_id, working, **kw)

    monkeypatch.setattr(RestClient, "report_activity", recorded)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(hold)):
            message = platform.post_message(info.room_id, info.user_id, "held")
            await entered.wait()
            platform.send_control(info.agent_id, mode, room_id=info.room_id)  # type: ignore[arg-type]
            want = "processed" if mode == "interrupt" else "processing"
            await platform.wait_until(lambda: reporters and status(platform, message) == want)
    assert reporters == adapter_task


class Stepped(trio.abc.Instrument):
    """The tasks trio steps while `recording` is set."""

    def __init__(self) -> None:
        self.recording = False
        self.tasks: list[str] = []

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.recording:
            self.tasks.append(task.name)


@pytest.mark.parametrize("mode", ["interrupt", "stop"])
async def test_an_aborted_turn_settles_before_any_other_task_runs(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """From the adapter's `Cancelled` to the settle's first request (the mark of an
    interrupt, the `working: false` of a stop) the turn's task runs on alone: the parked
    keep-alive is cancelled, not waited for, and leaves in a later round."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()
    stepped = Stepped()

    async def hold(turn: Turn) -> None:
        entered.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            stepped.recording = True
            raise

    mark, report = RestClient.mark_processed, RestClient.report_activity

    async def marked(self: RestClient, room_id: str, message_id: str, **kw: Any) -> object:
        stepped.recording = False
        return await mark(self, room_id, message_id, **kw)

    async def reported(self: RestClient, room_id: str, working: bool, **kw: Any) -> bool:
        if not working:
            stepped.recording = False
        return await report(self, room_id, working, **kw)

    monkeypatch.setattr(RestClient, "mark_processed", marked)
    monkeypatch.setattr(RestClient, "report_activity", reported)
    trio.lowlevel.add_instrument(stepped)
    try:
        with trio.fail_after(DEADLINE):
            async with running_agent(platform, Recorder(hold)):
                message = platform.post_message(info.room_id, info.user_id, "held")
                await entered.wait()
                await trio.testing.wait_all_tasks_blocked()  # the keep-alive is parked
                platform.send_control(info.agent_id, mode, room_id=info.room_id)  # type: ignore[arg-type]
                want = "processed" if mode == "interrupt" else "processing"
                await platform.wait_until(
                    lambda: status(platform, message) == want and not any(platform.working.values())
                )
    finally:
        trio.lowlevel.remove_instrument(stepped)
    assert stepped.tasks == []


async def test_a_keep_alive_report_on_the_wire_is_done_with_before_the_turn_settles(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keep-alive is waited for when the turn ends mid-report: its `working: true`
    (held open by the platform) is cancelled and gone before the mark and `working:
    false` leave, so neither can overtake it from this side."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    hold = platform.faults.hold_rest("activity")
    in_flight: list[bool] = []  # reports on the wire, one entry each
    seen_at_mark: list[int] = []

    async def answer_once_held(turn: Turn) -> None:
        await hold.arrived.wait()  # the keep-alive's first report is on the wire
        await turn.reply("ok")

    mark, report = RestClient.mark_processed, RestClient.report_activity

    async def marked(self: RestClient, room_id: str, message_id: str, **kw: Any) -> object:
        seen_at_mark.append(in_flight.count(True))
        return await mark(self, room_id, message_id, **kw)

    async def reported(self: RestClient, room_id: str, working: bool, **kw: Any) -> bool:
        in_flight.append(True)
        index = len(in_flight) - 1
        try:
            return await report(self, room_id, working, **kw)
        finally:
            in_flight[index] = False

    monkeypatch.setattr(RestClient, "mark_processed", marked)
    monkeypatch.setattr(RestClient, "report_activity", reported)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(answer_once_held)):
            message = platform.post_message(info.room_id, info.user_id, "answer")
            await platform.wait_until(lambda: bool(seen_at_mark))
            hold.release()
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert seen_at_mark == [0]


async def test_a_running_turn_holds_one_task_beside_it(platform: Platform) -> None:
    """A turn runs with one task beside its scope: its keep-alive, which also watches
    its abort (a turn that outlives its cleanup grace is reported from there). Each
    task more is a spawn per turn, and a wake per turn in the round after an
    agent-wide interrupt, which every room's mark waits out (docs/benchmarks.md,
    the scale rows)."""
    info = platform.info
    assert info.user_id
    rooms = rooms_with_the_agent(platform, ROOMS)

    async def hold(turn: Turn) -> None:
        await trio.sleep_forever()

    adapter = Recorder(hold)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            await platform.wait_until(lambda: nexts(platform) >= ROOMS)  # every room synced
            await trio.testing.wait_all_tasks_blocked()
            idle = len(running.tasks.living)
            posted = [platform.post_message(room, info.user_id, "held") for room in rooms]
            await adapter.wait_for(lambda: len(adapter.calls) == ROOMS)
            await trio.testing.wait_all_tasks_blocked()
            busy = len(running.tasks.living)
            platform.send_control(info.agent_id, "interrupt")  # type: ignore[arg-type]
            await platform.wait_until(
                lambda: all(status(platform, m) == "processed" for m in posted)
            )
    assert busy - idle == ROOMS, f"{busy - idle} tasks for {ROOMS} running turns"


ROOMS = 12


def nexts(platform: Platform) -> int:
    agent = platform.info.agent_id
    return sum(
        1
        for e in platform.log(0)
        if e.kind == "rest" and e.agent_id == agent and (e.path or "").endswith("/next")
    )


class Exits(trio.abc.Instrument):
    """The names of the tasks that exit, in order."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith("_KeepAlive.run"):
            self.log.append("keep-alive ended")


async def test_an_interrupted_turns_keep_alive_ends_after_its_mark(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an interrupt the turn's keep-alive is left parked (it reports nothing more,
    and no longer watches the abort) until the mark is answered, then ended, before
    `working: false` is sent: ending it earlier woke it in the round after the abort, and after
    an agent-wide interrupt that round is a thousand rooms' keep-alives, which the
    answers to the first marks wait out (docs/benchmarks.md, the scale rows)."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    order: list[str] = []
    original = RestClient.mark_processed
    reported = RestClient.report_activity

    async def marked(self: RestClient, *args: Any, **kw: Any) -> Any:
        try:
            return await original(self, *args, **kw)
        finally:
            order.append("marked")

    async def report(self: RestClient, room_id: str, working: bool, **kw: Any) -> bool:
        if not working:
            order.append("working: false")
        return await reported(self, room_id, working, **kw)

    async def hold(turn: Turn) -> None:
        await trio.sleep_forever()

    monkeypatch.setattr(RestClient, "mark_processed", marked)
    monkeypatch.setattr(RestClient, "report_activity", report)
    adapter = Recorder(hold)
    exits = Exits(order)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            message = platform.post_message(info.room_id, info.user_id, "held")
            await adapter.wait_for(lambda: len(adapter.calls) == 1)
            await trio.testing.wait_all_tasks_blocked()
            trio.lowlevel.add_instrument(exits)
            try:
                platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                await trio.testing.wait_all_tasks_blocked()
            finally:
                trio.lowlevel.remove_instrument(exits)
    assert order[0] == "marked"  # ended after it: its cancel, then (its exit) its wake
    assert sorted(order[1:]) == ["keep-alive ended", "working: false"]
