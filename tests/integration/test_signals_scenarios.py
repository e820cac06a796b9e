"""The signal scenarios (docs/discussion/cancellation.md) the other signal tests leave out.

Each test names the rule it holds; all run over real loopback sockets.
"""

from __future__ import annotations

import pytest
import trio
from test_signals import Gate, push_control

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, all_processed, replies, running_agent, status

DEADLINE = 10


async def test_a_working_false_keep_alive_reply_aborts_the_turn_and_leaves_it(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    gate = Gate()
    adapter = Recorder(gate)
    policy = Policy(working_keep_alive=0.02)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            message = platform.post_message(info.room_id, info.user_id, "keep me alive")
            await adapter.wait_for(lambda: adapter.calls == ["keep me alive"])
            # the stop push is lost: only the next keep-alive's answer tells the agent
            platform.store.stop(info.agent_id, [info.room_id])
            await adapter.wait_for(lambda: adapter.cancelled == ["keep me alive"])
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.running is None)
            assert not room.stopped  # the platform's stop, not ours
            assert status(platform, message) == "processing"  # left for replay
            gate.release.set()
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert adapter.calls == ["keep me alive", "keep me alive"]
    assert replies(platform, info.room_id) == ["done: keep me alive"]


async def test_a_signal_that_reached_no_room_is_not_remembered(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.user_id
    later = platform.create_room(title="later", participants=[info.user_id])
    adapter = Recorder(Gate())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            agent = running.agent
            push_control(platform, "interrupt", "ctl-early", room_id=later.id)  # not in it yet
            await agent.wait_until(lambda: agent.signals.applied == 0)
            platform.add_participant(later.id, info.agent_id)
            await agent.wait_until(lambda: later.id in agent.rooms and agent.rooms[later.id].joined)
            message = platform.post_message(later.id, info.user_id, "now interrupt me")
            await adapter.wait_for(lambda: adapter.calls == ["now interrupt me"])
            push_control(platform, "interrupt", "ctl-early", room_id=later.id)  # a later copy
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert adapter.cancelled == ["now interrupt me"]
    assert running.agent.signals.duplicates == 0


async def test_the_dedup_memory_holds_the_last_256_ids(platform: Platform) -> None:
    info = platform.info
    assert info.room_id
    memory = Policy().control_dedup_memory
    assert memory == 256
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder()) as running:
            agent = running.agent
            ids = [f"ctl-{i}" for i in range(memory + 1)]  # the 257th pushes the first out
            for correlation in ids:
                push_control(platform, "play", correlation, room_id=info.room_id)
            await agent.wait_until(lambda: agent.signals.applied == memory + 1)
            push_control(platform, "play", ids[1], room_id=info.room_id)  # still remembered
            await agent.wait_until(lambda: agent.signals.duplicates == 1)
            push_control(platform, "play", ids[0], room_id=info.room_id)  # forgotten: applies
            await agent.wait_until(lambda: agent.signals.applied == memory + 2)
            assert agent.signals.duplicates == 1


async def test_a_reconcile_tick_while_stopped_calls_no_adapter(
    platform: Platform, autojump_clock: object
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    policy = Policy(reconcile_interval=1.0, reconcile_interval_max=1.0, stopped_probe_interval=3600)

    def nexts() -> int:
        return sum(1 for e in platform.log() if e.path and e.path.endswith("/next"))

    with trio.fail_after(7200):
        async with running_agent(platform, adapter, policy=policy) as running:
            await platform.wait_until(lambda: nexts() == 1)  # the start-up pass is over
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.stopped)
            # open the platform's gate behind the agent's back: only the room's own
            # suppression keeps a reconcile's pass from running the adapter
            platform.store.play(info.agent_id, info.room_id)
            waiting = platform.post_message(info.room_id, info.user_id, "while stopped")
            await trio.sleep(30 * policy.reconcile_interval)  # time is the subject: 30 ticks
            assert adapter.calls == []
            assert status(platform, waiting) == "delivered"
            assert nexts() == 1  # no pass, not even a fetch, while stopped
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, waiting) == "processed")
    assert adapter.calls == ["while stopped"]


@pytest.mark.long(11)
async def test_a_signal_reaches_a_running_turn_behind_a_deep_queue_of_pushes(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()

    async def block_the_first(turn: Turn) -> None:
        if turn.message.content == "first":
            entered.set()
            await trio.sleep_forever()
        await turn.reply("ok")

    adapter = Recorder(block_the_first)
    depth = 300
    with trio.fail_after(DEADLINE * 3):
        async with running_agent(platform, adapter) as running:
            first = platform.post_message(info.room_id, info.user_id, "first")
            await entered.wait()
            queued = [
                platform.post_message(info.room_id, info.user_id, f"q {i}") for i in range(depth)
            ]
            # every push has reached the agent and waits in the room's queue
            pushed = [0, 0]  # pushes counted, the next log entry to read

            def all_pushed() -> bool:  # reads each log entry once, not the log at each change
                new = platform.log(pushed[1])
                pushed[0] += sum(1 for e in new if e.kind == "ws_out")
                pushed[1] = new[-1].seq + 1 if new else pushed[1]
                return pushed[0] >= depth + 1

            await platform.wait_until(all_pushed)
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, first) == "processed")
            assert adapter.cancelled == ["first"]
            assert adapter.calls[:2] == ["first", "q 0"][: len(adapter.calls)]
            await platform.wait_until(all_processed(platform, queued))
    assert adapter.calls == ["first"] + [f"q {i}" for i in range(depth)]
    assert running.stop_result is not None and running.stop_result.graceful
