"""Remote work owned by the turn: one named test per rule (docs/reference/adapters.md).

The agent and the platform run over real loopback sockets and the signals
travel as `agent.control` pushes. The remote backend here is a stand-in in
the test (`Backend`), because each rule is about *when* the runtime sends a
stop, and the stand-in can hold a start or a stop open at an exact point; the
reference adapters' tests run the same rules against real peers (a2a-sdk,
stubllm, process groups).
"""

from __future__ import annotations

import contextlib
import time

import pytest
import trio

from band_trio import Policy, StopOutcome, Turn
from band_trio.contract import StopAnswer, run_in_thread
from band_trio.platform import Platform
from band_trio.testing import Behaviour
from support import Recorder, replies, running_agent, seeded, status

DEADLINE = 10
FAST = Policy(backend_stop_grace=0.5, cleanup_grace=0.3, shutdown_grace=0.2)


class Backend:
    """A remote backend stand-in: starts work, takes stop requests, can be held."""

    def __init__(self, answer: StopAnswer | Exception = StopOutcome.CONFIRMED) -> None:
        self.answer = answer
        self.started: list[str] = []
        self.stops: list[tuple[str, float]] = []
        """(handle, perf_counter) of every stop received."""
        self.start_gate: trio.Event | None = None
        """If set, a start waits for it (a start call still in flight)."""
        self.stop_gate: trio.Event | None = None
        """If set, a stop waits for it (a peer slow to answer; never set = hangs)."""
        self.stop_delay = 0.0
        """How long a stop takes to answer (a slow peer)."""
        self.stop_settled: list[float] = []
        self.start_entered = trio.Event()
        self.stop_entered = trio.Event()
        self._changed = trio.Event()

    async def start(self, name: str) -> str:
        self.start_entered.set()
        if self.start_gate is not None:
            await self.start_gate.wait()
        self.started.append(name)
        self._notify()
        return f"task-{name}"

    async def stop(self, handle: str) -> StopAnswer:
        self.stops.append((handle, time.perf_counter()))
        self.stop_entered.set()
        self._notify()
        try:
            if self.stop_gate is not None:
                await self.stop_gate.wait()
            await trio.sleep(self.stop_delay)
            if isinstance(self.answer, Exception):
                raise self.answer
            return self.answer
        finally:
            self.stop_settled.append(time.perf_counter())
            self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: object) -> None:
        assert callable(predicate)
        while not predicate():
            await self._changed.wait()


def remote_turn(backend: Backend, *, finish: bool = False) -> Behaviour:
    """An adapter behaviour: start remote work, then wait forever (until aborted)."""

    async def behaviour(turn: Turn) -> None:
        async with turn.remote(stop=backend.stop, name="job") as work:
            with work.starting():
                work.started(await backend.start(turn.message.content))
            if finish:
                work.finished()
            await trio.sleep_forever()
        await turn.reply(f"done: {turn.message.content}")

    return behaviour


async def test_the_remote_stop_is_sent_at_most_once_per_turn(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend()
    backend.stop_gate = trio.Event()  # a second signal lands while the first stop runs
    adapter = Recorder(remote_turn(backend))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "one")
            await backend.wait_for(lambda: backend.started == ["one"])
            platform.send_control(agent_id, "interrupt", room_id=room)
            await backend.stop_entered.wait()
            platform.send_control(agent_id, "interrupt", room_id=room)
            await running.agent.wait_until(lambda: running.agent.signals.applied == 2)
            backend.stop_gate.set()
            await platform.wait_until(lambda: status(platform, message) == "processed")
            stats = running.agent.remote_stops
    assert [handle for handle, _ in backend.stops] == ["task-one"]
    assert (stats.confirmed, stats.sent) == (1, 1)


async def test_the_remote_stop_never_delays_the_signals_cancel(platform: Platform) -> None:
    """The stop hangs; the adapter's local work is cancelled at once all the same, the
    stop ends `unconfirmed` at its grace, and another room's signal is not held up."""
    agent_id, room, user = seeded(platform)
    other = platform.create_room(title="other", participants=[user, agent_id]).id
    assert other
    backend = Backend()
    backend.stop_gate = trio.Event()  # never set: the peer never answers the stop
    cancelled_locally: dict[str, float] = {}

    async def behaviour(turn: Turn) -> None:
        if turn.room_id == other:
            await trio.sleep_forever()
        async with turn.remote(stop=backend.stop, name="job") as work:
            with work.starting():
                work.started(await backend.start(turn.message.content))
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                cancelled_locally[turn.message.id] = time.perf_counter()
                raise

    adapter = Recorder(behaviour)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            hung = platform.post_message(room, user, "hung")
            busy = platform.post_message(other, user, "other")
            await adapter.wait_for(lambda: len(adapter.calls) == 2)
            await backend.wait_for(lambda: backend.started == ["hung"])
            platform.send_control(agent_id, "interrupt", room_id=room)
            await backend.stop_entered.wait()
            assert hung in cancelled_locally  # before the stop has any answer
            platform.send_control(agent_id, "interrupt", room_id=other)
            await platform.wait_until(lambda: status(platform, busy) == "processed")
            assert not backend.stop_settled  # the other room did not wait for the stop
            await platform.wait_until(lambda: status(platform, hung) == "processed")
            stop = running.agent.remote_stops.recent[-1]
    assert backend.stops[0][1] >= cancelled_locally[hung]
    assert stop.outcome is StopOutcome.UNCONFIRMED
    assert "no answer within 0.5s" in stop.detail
    assert (stop.room_id, stop.message_id, stop.handle) == (room, hung, "task-hung")


async def test_a_cancel_during_the_start_call_sends_the_stop_once_the_handle_is_revealed(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend()
    backend.start_gate = trio.Event()
    adapter = Recorder(remote_turn(backend))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "early")
            await backend.start_entered.wait()
            platform.send_control(agent_id, "interrupt", room_id=room)
            await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
            assert backend.stops == []  # nothing to stop yet: the handle is not known
            backend.start_gate.set()  # the start call returns its handle now
            await platform.wait_until(lambda: status(platform, message) == "processed")
            stop = running.agent.remote_stops.recent[-1]
    assert backend.started == ["early"]
    assert [handle for handle, _ in backend.stops] == ["task-early"]
    assert stop.outcome is StopOutcome.CONFIRMED
    assert stop.waited > 0  # the stop waited for the handle
    assert replies(platform, room) == []


async def test_a_start_that_never_reveals_its_handle_is_bounded_and_reported(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend()
    backend.start_gate = trio.Event()  # never set
    adapter = Recorder(remote_turn(backend))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "lost")
            await backend.start_entered.wait()
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            stop = running.agent.remote_stops.recent[-1]
    assert backend.stops == []
    assert stop.outcome is StopOutcome.UNCONFIRMED
    assert "revealed no handle" in stop.detail
    assert running.stop_result is not None and running.stop_result.overran == ()


async def test_a_stop_after_the_remote_work_finished_sends_nothing(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend()
    adapter = Recorder(remote_turn(backend, finish=True))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "finished")
            await backend.wait_for(lambda: backend.started == ["finished"])
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            assert running.agent.remote_stops.sent == 0
    assert backend.stops == []
    assert adapter.cancelled == ["finished"]


async def test_the_rooms_next_turn_waits_until_the_previous_stop_has_settled(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend()
    backend.stop_gate = trio.Event()
    adapter = Recorder(remote_turn(backend))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST.replace(backend_stop_grace=5)):
            platform.post_message(room, user, "first")
            await backend.wait_for(lambda: backend.started == ["first"])
            second = platform.post_message(room, user, "second")
            platform.send_control(agent_id, "interrupt", room_id=room)
            await backend.stop_entered.wait()
            with trio.move_on_after(0.3):  # the next turn does not start meanwhile
                await adapter.wait_for(lambda: "second" in adapter.calls)
            assert adapter.calls == ["first"]
            backend.stop_gate.set()
            await backend.wait_for(lambda: backend.started == ["first", "second"])
    assert adapter.entered[second][0] >= backend.stop_settled[0]


async def test_leaving_the_room_waits_until_the_stop_has_settled(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend()
    backend.stop_gate = trio.Event()
    left_at: list[float] = []
    adapter = Recorder(remote_turn(backend))
    adapter_on_room_left = adapter.on_room_left

    async def on_room_left(room_id: str) -> None:
        left_at.append(time.perf_counter())
        await adapter_on_room_left(room_id)

    adapter.on_room_left = on_room_left  # type: ignore[method-assign]
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST.replace(backend_stop_grace=5)):
            platform.post_message(room, user, "leaving")
            await backend.wait_for(lambda: backend.started == ["leaving"])
            platform.remove_participant(room, agent_id)
            await backend.stop_entered.wait()
            with trio.move_on_after(0.3):
                await adapter.wait_for(lambda: bool(adapter.left))
            assert adapter.left == []  # the room is not torn down while the stop runs
            backend.stop_gate.set()
            await adapter.wait_for(lambda: adapter.left == [room])
    assert left_at[0] >= backend.stop_settled[0]


async def test_a_remote_stop_slower_than_the_cleanup_grace_is_no_overrun(
    platform: Platform,
) -> None:
    """The turn is still settling its remote stop (bounded by its own grace): the
    watchdog does not report it as ignoring the interrupt."""
    agent_id, room, user = seeded(platform)
    backend = Backend()
    backend.stop_delay = (FAST.cleanup_grace + FAST.backend_stop_grace) / 2
    adapter = Recorder(remote_turn(backend))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "slow stop")
            await backend.wait_for(lambda: backend.started == ["slow stop"])
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert running.stop_result is not None
    assert running.stop_result.overran == ()
    assert running.agent.remote_stops.confirmed == 1


async def test_the_agents_stop_waits_for_remote_stops(platform: Platform) -> None:
    _, room, user = seeded(platform)
    backend = Backend()
    backend.stop_gate = trio.Event()
    backend.stop_delay = 2 * FAST.cleanup_grace  # slower than the cleanup grace (of 5 s here)
    adapter = Recorder(remote_turn(backend))
    policy = FAST.replace(shutdown_grace=0.1, backend_stop_grace=5)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            message = platform.post_message(room, user, "shutdown")
            await backend.wait_for(lambda: backend.started == ["shutdown"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(running.agent.stop)
                await backend.stop_entered.wait()
                assert running.agent.running  # run() has not returned with the stop open
                backend.stop_gate.set()
    assert running.stop_result is not None
    assert running.stop_result.overran == ()  # a stop in progress is not an overrun
    assert running.stop_result.cancelled == ((room, message),)
    assert status(platform, message) == "processing"  # shutdown leaves it for later
    assert len(backend.stops) == 1


@pytest.mark.parametrize(
    ("answer", "outcome", "detail"),
    [
        (StopOutcome.CONFIRMED, StopOutcome.CONFIRMED, ""),
        (None, StopOutcome.REQUESTED, ""),
        ((StopOutcome.REQUESTED, "accepted"), StopOutcome.REQUESTED, "accepted"),
        (RuntimeError("refused: -32002"), StopOutcome.UNCONFIRMED, "RuntimeError: refused"),
    ],
)
async def test_every_stop_outcome_is_on_the_turn_and_in_the_agents_stats(
    platform: Platform, answer: StopAnswer | Exception, outcome: StopOutcome, detail: str
) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend(answer)
    seen: list[tuple[object, ...]] = []

    async def behaviour(turn: Turn) -> None:
        try:
            await remote_turn(backend)(turn)
        finally:
            seen.extend(turn.remote_stops)

    adapter = Recorder(behaviour)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "outcome")
            await backend.wait_for(lambda: backend.started == ["outcome"])
            platform.send_control(agent_id, "stop", room_id=room)
            await backend.wait_for(lambda: bool(backend.stop_settled))
            await running.agent.wait_until(lambda: running.agent.rooms[room].running is None)
            stats = running.agent.remote_stops
    assert [stop.outcome for stop in seen] == [outcome]  # type: ignore[attr-defined]
    assert stats.recent[-1].outcome is outcome
    assert detail in stats.recent[-1].detail
    counts = {StopOutcome.CONFIRMED: 0, StopOutcome.REQUESTED: 0, StopOutcome.UNCONFIRMED: 0}
    counts[outcome] = 1
    assert (stats.confirmed, stats.requested, stats.unconfirmed) == tuple(counts.values())
    assert status(platform, message) == "processing"


async def test_a_swallowed_cancel_still_sends_the_stop(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    backend = Backend()

    async def swallower(turn: Turn) -> None:
        async with turn.remote(stop=backend.stop, name="job") as work:
            with work.starting():
                work.started(await backend.start(turn.message.content))
            with contextlib.suppress(trio.Cancelled):  # wrong, but it happens
                await trio.sleep_forever()  # ...and the block is left normally

    adapter = Recorder(swallower)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST):
            message = platform.post_message(room, user, "swallow")
            await backend.wait_for(lambda: backend.started == ["swallow"])
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert [handle for handle, _ in backend.stops] == ["task-swallow"]


async def test_blocking_work_in_a_thread_is_abandoned_and_its_late_result_discarded(
    platform: Platform,
) -> None:
    import threading

    agent_id, room, user = seeded(platform)
    entered = threading.Event()
    release = threading.Event()
    returned = threading.Event()
    results: list[str] = []

    def blocking() -> str:
        entered.set()
        release.wait(DEADLINE)
        returned.set()
        return "late"

    async def behaviour(turn: Turn) -> None:
        results.append(await run_in_thread(turn, blocking))

    adapter = Recorder(behaviour)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "thread")
            await trio.to_thread.run_sync(entered.wait)
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            assert not returned.is_set()  # the turn ended while the thread still runs
            stop = running.agent.remote_stops.recent[-1]
            release.set()
            await trio.to_thread.run_sync(returned.wait)
    assert results == []  # the late result went nowhere
    assert adapter.cancelled == ["thread"]
    assert stop.outcome is StopOutcome.UNCONFIRMED
    assert "abandoned" in stop.detail
    assert replies(platform, room) == []


async def test_the_turn_deadline_fails_the_message_and_stops_its_remote_work(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    backend = Backend()
    adapter = Recorder(remote_turn(backend))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST.replace(turn_deadline=0.2)):
            message = platform.post_message(room, user, "slow")
            await platform.wait_until(lambda: status(platform, message) == "failed")
    assert [handle for handle, _ in backend.stops] == ["task-slow"]
    assert adapter.cancelled == ["slow"]


async def test_a_start_cut_off_is_the_stop_for_work_that_closes_on_cancel(
    platform: Platform,
) -> None:
    """An HTTP stream's request is not shielded: the cancel closes its connection, and
    that is recorded as the stop (`requested`), never as nothing."""
    agent_id, room, user = seeded(platform)
    backend = Backend()
    backend.start_gate = trio.Event()  # the response never comes

    async def behaviour(turn: Turn) -> None:
        async with turn.remote(stop=backend.stop, name="stream", closes_on_cancel=True) as work:
            work.started(await backend.start(turn.message.content))  # not shielded

    adapter = Recorder(behaviour)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "stream")
            await backend.start_entered.wait()
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            stop = running.agent.remote_stops.recent[-1]
    assert backend.stops == []  # no handle, so no stop call: the close was the stop
    assert stop.outcome is StopOutcome.REQUESTED
    assert "closing the connection" in stop.detail
