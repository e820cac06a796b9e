"""Signal scenarios that need the platform to misbehave on purpose (platform.faults)."""

from __future__ import annotations

import trio

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, claims, replies, running_agent, status, ws_opens

DEADLINE = 10


async def test_interrupt_in_the_claim_window_never_calls_the_adapter_and_consumes_once(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            hold = platform.faults.hold_rest("processing")
            message = platform.post_message(info.room_id, info.user_id, "claimed slowly")
            await hold.arrived.wait()  # the claim is in flight, held open by the platform
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
            await trio.testing.wait_all_tasks_blocked()
            # nothing more is sent until the claim has its answer: a second claim (or a
            # mark) racing the first could be overtaken by it, and the late claim would
            # reopen the message the user interrupted
            assert claims(platform, message) == 0  # the held one is logged once answered
            assert status(platform, message) == "delivered"
            hold.release()
            await platform.wait_until(lambda: status(platform, message) == "processed")
            after = platform.post_message(info.room_id, info.user_id, "after")
            await platform.wait_until(lambda: status(platform, after) == "processed")
    assert adapter.calls == ["after"]  # never called for the interrupted one
    assert replies(platform, info.room_id) == ["echo: after"]
    assert claims(platform, message) == 1  # consumed with the one claim
    assert platform.delivery(message)[info.agent_id] == {"status": "processed", "attempts": 1}
    assert platform.stats["reopened"] == 0  # nothing claimed it after the consuming mark


async def test_stop_in_the_claim_window_never_calls_the_adapter_and_leaves(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            hold = platform.faults.hold_rest("processing")
            message = platform.post_message(info.room_id, info.user_id, "claimed slowly")
            await hold.arrived.wait()
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.stopped)
            hold.release()  # the claim runs to its answer: its outcome is known
            await running.agent.wait_until(lambda: room.running is None)
            await trio.testing.wait_all_tasks_blocked()
            assert adapter.calls == []
            assert status(platform, message) == "delivered"  # the gate answered the claim 204
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert adapter.calls == ["claimed slowly"]  # replayed once after play


async def test_a_failed_processed_mark_of_an_interrupt_is_retried_without_rerunning(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()

    async def block(turn: Turn) -> None:
        entered.set()
        await trio.sleep_forever()

    adapter = Recorder(block)
    policy = Policy(reconcile_interval=0.05, reconcile_interval_max=0.05, rest_max_retries=0)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            platform.faults.fail_rest("processed", 503, count=1)
            message = platform.post_message(info.room_id, info.user_id, "interrupt me")
            await entered.wait()
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            room = running.agent.rooms[info.room_id]
            await platform.wait_until(lambda: room.standing(message) == "ack_pending")
            assert status(platform, message) == "processing"  # the mark did not land
            await platform.wait_until(lambda: status(platform, message) == "processed")
    marks = [
        e.status
        for e in platform.log()
        if e.kind == "rest" and e.path and e.path.endswith("/processed")
    ]
    assert marks == [503, 200]  # retried, once
    assert adapter.calls == ["interrupt me"]  # never re-run
    assert claims(platform, message) == 1  # the retried mark needs no second claim


async def test_reconnect_while_stopped_does_not_call_the_adapter(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.stopped)
            waiting = platform.post_message(info.room_id, info.user_id, "while stopped")
            # open the platform's gate behind the agent's back: only the agent's own
            # suppression now keeps the reconnect's resync from running the adapter
            platform.store.play(info.agent_id, info.room_id)
            assert platform.faults.drop_socket(info.agent_id)
            await platform.wait_until(lambda: ws_opens(platform) == 2)
            await platform.wait_until(lambda: info.agent_id in platform.connected_agents())
            await running.agent.wait_until(lambda: running.agent.connects == 2)
            await trio.testing.wait_all_tasks_blocked()
            assert adapter.calls == []
            assert status(platform, waiting) == "delivered"
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, waiting) == "processed")
    assert adapter.calls == ["while stopped"]


async def test_a_play_missed_while_disconnected_is_found_by_the_probe(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    policy = Policy(stopped_probe_interval=0.1, reconnect_base=0.05)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.stopped)
            waiting = platform.post_message(info.room_id, info.user_id, "missed play")
            platform.faults.refuse_upgrades(2, 503)
            assert platform.faults.drop_socket(info.agent_id)
            await platform.wait_until(lambda: info.agent_id not in platform.connected_agents())
            platform.send_control(info.agent_id, "play", room_id=info.room_id)  # nobody hears
            await platform.wait_until(lambda: status(platform, waiting) == "processed")
            await running.agent.wait_until(lambda: not room.stopped)
    assert adapter.calls == ["missed play"]


async def test_a_turn_that_ignores_its_cancellation_is_reported(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()

    async def ignore_cancel(turn: Turn) -> None:
        entered.set()
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.3)  # stands in for cleanup that hangs past its grace

    adapter = Recorder(ignore_cancel)
    policy = Policy(cleanup_grace=0.05)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            message = platform.post_message(info.room_id, info.user_id, "stubborn")
            await entered.wait()
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    result = running.stop_result
    assert result is not None and not result.graceful
    assert [(o.room_id, o.message_id) for o in result.overran] == [(info.room_id, message)]
    assert "interrupt" in result.overran[0].what
