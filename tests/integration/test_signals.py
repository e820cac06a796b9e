"""interrupt, stop and play: one named test per rule of docs/discussion/cancellation.md.

Everything runs over real loopback sockets against the embedded platform; the
signals travel as `agent.control` pushes on the agent's websocket.
"""

from __future__ import annotations

import uuid

import trio

from band_trio import Policy, Turn
from band_trio.platform import Platform
from band_trio.wire import AgentControl
from support import Recorder, all_processed, claims, replies, running_agent, status

DEADLINE = 10


def push_control(
    platform: Platform,
    mode: str,
    correlation_id: str,
    *,
    room_id: str | None,
    scope: str = "room",
) -> None:
    """Push an `agent.control` with a chosen correlation id (the platform picks fresh ones)."""
    agent_id = platform.info.agent_id
    assert agent_id
    payload = AgentControl(
        mode=mode,  # type: ignore[arg-type]
        scope=scope,  # type: ignore[arg-type]
        agent_id=agent_id,
        correlation_id=correlation_id,
        execution_id=None,
        room_id=room_id,
    )
    assert platform.hub.push(agent_id, f"agent_control:{agent_id}", "agent.control", payload)


class Gate:
    """An adapter behaviour that blocks each turn until released, then replies."""

    def __init__(self) -> None:
        self.release = trio.Event()

    async def __call__(self, turn: Turn) -> None:
        await self.release.wait()
        await turn.reply(f"done: {turn.message.content}")


async def test_interrupt_mid_turn(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    gate = Gate()
    adapter = Recorder(gate)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            first = platform.post_message(info.room_id, info.user_id, "first")
            await adapter.wait_for(lambda: adapter.calls == ["first"])
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, first) == "processed")
            assert adapter.cancelled == ["first"]
            gate.release.set()
            second = platform.post_message(info.room_id, info.user_id, "second")
            await platform.wait_until(lambda: status(platform, second) == "processed")
    assert replies(platform, info.room_id) == ["done: second"]  # nothing sent for "first"
    assert adapter.finished == ["second"]


async def test_interrupt_during_a_tool_call_never_delivers_its_late_result(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    tool_started = trio.Event()
    tool_finished = trio.Event()

    async def slow_tool() -> str:
        tool_started.set()
        await tool_finished.wait()
        return "42"

    async def use_tool(turn: Turn) -> None:
        if turn.message.content != "compute":
            await turn.reply("ok")
            return
        await turn.send_event("calling the calculator", message_type="tool_call")
        result = await slow_tool()
        await turn.send_event(result, message_type="tool_result")
        await turn.reply(f"the answer is {result}")

    adapter = Recorder(use_tool)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            asked = platform.post_message(info.room_id, info.user_id, "compute")
            await tool_started.wait()
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, asked) == "processed")
            tool_finished.set()  # the tool "returns" after the interrupt
            later = platform.post_message(info.room_id, info.user_id, "anything else")
            await platform.wait_until(lambda: status(platform, later) == "processed")
    events = [e.body or "" for e in platform.log() if e.path and e.path.endswith("/events")]
    assert len(events) == 1 and "tool_call" in events[0]  # no tool_result ever posted
    assert "the answer is 42" not in replies(platform, info.room_id)


async def test_interrupt_with_nothing_running_arms_nothing(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
            message = platform.post_message(info.room_id, info.user_id, "untouched")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert adapter.cancelled == []
    assert replies(platform, info.room_id) == ["echo: untouched"]


async def test_stop_mid_turn_leaves_the_message_and_ignores_pushes(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder(Gate())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            held = platform.post_message(info.room_id, info.user_id, "held")
            await adapter.wait_for(lambda: adapter.calls == ["held"])
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await adapter.wait_for(lambda: adapter.cancelled == ["held"])
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.running is None)  # the local claim released
            pushed = platform.post_message(info.room_id, info.user_id, "while stopped")
            # the push reaches the agent (its echo is in the log) but is never claimed
            await platform.wait_until(
                lambda: any(
                    e.kind == "ws_out" and e.frame and pushed in e.frame for e in platform.log()
                )
            )
            await trio.testing.wait_all_tasks_blocked()
            assert claims(platform, pushed) == 0
            assert status(platform, held) == "processing"
            assert status(platform, pushed) == "delivered"
    assert replies(platform, info.room_id) == []
    assert adapter.calls == ["held"]


async def test_play_replays_the_stopped_message_then_the_newer_ones_in_order(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    gate = Gate()
    adapter = Recorder(gate)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            held = platform.post_message(info.room_id, info.user_id, "held")
            await adapter.wait_for(lambda: adapter.calls == ["held"])
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await adapter.wait_for(lambda: adapter.cancelled == ["held"])
            newer = [
                platform.post_message(info.room_id, info.user_id, f"new {i}") for i in range(3)
            ]
            gate.release.set()
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(all_processed(platform, [held, *newer]))
    assert adapter.calls == ["held", "held", "new 0", "new 1", "new 2"]
    assert replies(platform, info.room_id) == [
        "done: held",
        "done: new 0",
        "done: new 1",
        "done: new 2",
    ]


async def test_stop_then_play_at_the_default_budget_still_reaches_the_adapter(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    gate = Gate()
    adapter = Recorder(gate)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(max_attempts=1)) as running:
            held = platform.post_message(info.room_id, info.user_id, "held")
            await adapter.wait_for(lambda: adapter.calls == ["held"])
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await adapter.wait_for(lambda: adapter.cancelled == ["held"])
            room = running.agent.rooms[info.room_id]
            await platform.wait_until(lambda: room.attempts(held) == 0)  # given back
            gate.release.set()
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, held) == "processed")
    assert adapter.finished == ["held"]


async def test_interrupt_in_the_backlog_pass_consumes_only_that_message(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    backlog = [platform.post_message(info.room_id, info.user_id, f"old {i}") for i in range(3)]
    started = trio.Event()

    async def block_first(turn: Turn) -> None:
        if turn.message.content == "old 0":
            started.set()
            await trio.sleep_forever()
        await turn.reply("ok")

    adapter = Recorder(block_first)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            await started.wait()
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(all_processed(platform, backlog))
    assert adapter.calls == ["old 0", "old 1", "old 2"]  # "old 0" was not re-run
    assert adapter.cancelled == ["old 0"]


async def test_stop_in_the_backlog_pass_ends_the_pass(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    backlog = [platform.post_message(info.room_id, info.user_id, f"old {i}") for i in range(3)]
    adapter = Recorder(Gate())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            await adapter.wait_for(lambda: adapter.calls == ["old 0"])
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await adapter.wait_for(lambda: adapter.cancelled == ["old 0"])
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.running is None)
            await trio.testing.wait_all_tasks_blocked()
            assert adapter.calls == ["old 0"]  # not re-run, and the pass did not go on
            assert [status(platform, m) for m in backlog] == [
                "processing",
                "delivered",
                "delivered",
            ]
            assert claims(platform, backlog[0]) == 1


async def test_stop_in_a_resync_pass_ends_the_pass(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder(Gate())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await running.agent.wait_until(lambda: running.agent.rooms[info.room_id].stopped)
            waiting = [
                platform.post_message(info.room_id, info.user_id, f"w {i}") for i in range(3)
            ]
            platform.send_control(info.agent_id, "play", room_id=info.room_id)  # a resync pass
            await adapter.wait_for(lambda: adapter.calls == ["w 0"])
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await adapter.wait_for(lambda: adapter.cancelled == ["w 0"])
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.running is None)
            await trio.testing.wait_all_tasks_blocked()
            assert adapter.calls == ["w 0"]
            assert [status(platform, m) for m in waiting] == [
                "processing",
                "delivered",
                "delivered",
            ]


async def test_an_adapter_that_swallows_the_cancellation_is_still_aborted(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()

    async def stubborn(turn: Turn) -> None:
        try:
            entered.set()
            await trio.sleep_forever()
        except trio.Cancelled:
            return  # swallowed: returns as if it had succeeded

    adapter = Recorder(stubborn)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            message = platform.post_message(info.room_id, info.user_id, "try me")
            await entered.wait()
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            held = platform.post_message(info.room_id, info.user_id, "and stop me")
            await adapter.wait_for(lambda: len(adapter.calls) == 2)
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.stopped and room.running is None)
            await trio.testing.wait_all_tasks_blocked()
            assert status(platform, held) == "processing"  # left, not marked processed
            assert not [
                e for e in platform.log() if e.path and e.path.endswith(f"{held}/processed")
            ]
    # "interrupted" normally but no reply, and the agent still shut down cleanly
    assert replies(platform, info.room_id) == []
    assert running.stop_result is not None and running.stop_result.graceful
    assert running.tasks.living == set()


async def test_shutdown_mid_turn_leaves_the_message_processing(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    adapter = Recorder(Gate())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(shutdown_grace=0)):
            message = platform.post_message(info.room_id, info.user_id, "in flight")
            await adapter.wait_for(lambda: adapter.calls == ["in flight"])
    assert adapter.cancelled == ["in flight"]
    assert status(platform, message) == "processing"
    marks = [
        e.path for e in platform.log() if e.path and e.path.endswith(("/processed", "/failed"))
    ]
    assert marks == []


async def test_duplicate_signals_are_applied_once_and_distinct_ones_each_time(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder(Gate())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            agent = running.agent
            one = platform.post_message(info.room_id, info.user_id, "one")
            await adapter.wait_for(lambda: adapter.calls == ["one"])
            push_control(platform, "interrupt", "ctl-same", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, one) == "processed")
            two = platform.post_message(info.room_id, info.user_id, "two")
            await adapter.wait_for(lambda: adapter.calls == ["one", "two"])
            push_control(platform, "interrupt", "ctl-same", room_id=info.room_id)  # redelivered
            await agent.wait_until(lambda: agent.signals.duplicates == 1)
            assert adapter.cancelled == ["one"]  # the newer turn was not hit
            push_control(platform, "interrupt", "ctl-other", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, two) == "processed")
            assert adapter.cancelled == ["one", "two"]
            three = platform.post_message(info.room_id, info.user_id, "three")
            await adapter.wait_for(lambda: adapter.calls[-1:] == ["three"])
            push_control(platform, "interrupt", "", room_id=info.room_id)  # no usable id
            await platform.wait_until(lambda: status(platform, three) == "processed")
            four = platform.post_message(info.room_id, info.user_id, "four")
            await adapter.wait_for(lambda: adapter.calls[-1:] == ["four"])
            push_control(platform, "interrupt", "", room_id=info.room_id)  # never deduplicated
            await platform.wait_until(lambda: status(platform, four) == "processed")
            assert adapter.cancelled == ["one", "two", "three", "four"]


async def test_a_play_is_never_a_duplicate_of_a_stop(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            room = running.agent.rooms[info.room_id]
            shared = f"ctl-{uuid.uuid4().hex}"
            push_control(platform, "stop", shared, room_id=info.room_id)
            await running.agent.wait_until(lambda: room.stopped)
            push_control(platform, "play", shared, room_id=info.room_id)
            await running.agent.wait_until(lambda: not room.stopped)


async def test_agent_scope_fans_out_room_scope_reaches_one_unknown_room_is_a_noop(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    gate = Gate()
    adapter = Recorder(gate)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            other = platform.create_room(title="other", participants=[info.user_id, info.agent_id])
            await running.agent.wait_until(
                lambda: other.id in running.agent.rooms and running.agent.rooms[other.id].joined
            )

            async def both_running(tag: str) -> tuple[str, str]:
                a = platform.post_message(info.room_id, info.user_id, f"{tag} a")
                b = platform.post_message(other.id, info.user_id, f"{tag} b")
                await adapter.wait_for(lambda: {f"{tag} a", f"{tag} b"} <= set(adapter.calls))
                return a, b

            a, b = await both_running("agent")
            platform.send_control(info.agent_id, "interrupt")  # scope=agent, no room
            await platform.wait_until(
                lambda: status(platform, a) == status(platform, b) == "processed"
            )
            assert set(adapter.cancelled) == {"agent a", "agent b"}

            a, b = await both_running("room")
            platform.send_control(info.agent_id, "interrupt", room_id=other.id)
            await platform.wait_until(lambda: status(platform, b) == "processed")
            assert "room a" not in adapter.cancelled
            assert status(platform, a) == "processing"  # still running

            applied = running.agent.signals.applied
            push_control(platform, "interrupt", "ctl-nowhere", room_id="no-such-room")
            push_control(platform, "interrupt", "ctl-noscope", room_id=None, scope="room")
            await platform.wait_until(
                lambda: (
                    sum(
                        1
                        for e in platform.log()
                        if e.kind == "ws_out" and e.frame and "ctl-noscope" in e.frame
                    )
                    == 1
                )
            )
            await trio.testing.wait_all_tasks_blocked()
            assert running.agent.signals.applied == applied
            assert "room a" not in adapter.cancelled
            gate.release.set()
            await platform.wait_until(lambda: status(platform, a) == "processed")


async def test_a_post_refused_as_stopped_aborts_the_turn_and_leaves_it_replayable(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    gate = Gate()
    adapter = Recorder(gate)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            message = platform.post_message(info.room_id, info.user_id, "reply refused")
            await adapter.wait_for(lambda: adapter.calls == ["reply refused"])
            # the turn's first `working: true` has been answered, and the next keep-alive
            # is seconds away: the post is what meets the gate
            await platform.wait_until(
                lambda: platform.working.get((info.agent_id, info.room_id)) is True
            )
            # the stop push is lost: only the platform's gate closes
            platform.store.stop(info.agent_id, [info.room_id])
            gate.release.set()
            await adapter.wait_for(lambda: adapter.cancelled == ["reply refused"])
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.running is None)
            assert not room.stopped  # the local stopped flag is not set
            assert status(platform, message) == "processing"
            refused = [
                e.status
                for e in platform.log()
                if e.kind == "rest"
                and e.method == "POST"
                and e.path
                and e.path.endswith("/messages")
            ]
            assert refused == [403]  # the post met the gate, and nothing else was sent
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert adapter.finished == ["reply refused"]
    assert replies(platform, info.room_id) == ["done: reply refused"]


async def test_interrupt_in_a_resync_pass_consumes_only_that_message(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder(Gate())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await running.agent.wait_until(lambda: running.agent.rooms[info.room_id].stopped)
            waiting = [
                platform.post_message(info.room_id, info.user_id, f"w {i}") for i in range(3)
            ]
            platform.send_control(info.agent_id, "play", room_id=info.room_id)  # a resync pass
            await adapter.wait_for(lambda: adapter.calls == ["w 0"])
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, waiting[0]) == "processed")
            await adapter.wait_for(lambda: adapter.calls == ["w 0", "w 1"])  # the pass goes on
            assert adapter.cancelled == ["w 0"]
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await adapter.wait_for(lambda: adapter.calls == ["w 0", "w 1", "w 2"])
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(all_processed(platform, waiting))
    assert adapter.calls == ["w 0", "w 1", "w 2"]  # none re-run


async def test_a_claim_answered_204_runs_nothing_and_charges_nothing(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            platform.store.stop(info.agent_id, [info.room_id])  # the gate, with no push
            message = platform.post_message(info.room_id, info.user_id, "gated")
            await platform.wait_until(lambda: claims(platform, message) == 1)
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.running is None)
            assert adapter.calls == []
            assert room.attempts(message) == 0
            assert not room.stopped
            assert status(platform, message) == "delivered"
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert adapter.calls == ["gated"]
