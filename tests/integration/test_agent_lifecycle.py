"""The agent's own lifecycle: start-up, graceful stop and reconnects, in every phase.

Each test here holds one rule of docs/discussion/closing.md and connection.md that lives above
the turn, and each began as a defect found by trying the agent as a new user
would (see the changelog).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio

from band_trio import Agent, Policy, StopResult, Turn
from band_trio.platform import Platform
from band_trio.runtime import UnsettledMark, _room
from support import (
    Recorder,
    all_processed,
    background_agent,
    rooms_with_the_agent,
    running_agent,
    status,
    ws_opens,
)

DEADLINE = 10
FAST = Policy(
    reconnect_base=0.02,
    reconnect_cap=0.1,
    room_restart_base=0.05,
    join_retry_base=0.02,
    join_retry_cap=0.1,
)


async def test_a_graceful_stop_sends_the_marks_of_turns_that_finish_inside_the_grace(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.user_id
    rooms = rooms_with_the_agent(platform, 3)
    release = trio.Event()

    async def finish_when_released(turn: Turn) -> None:
        await release.wait()
        await turn.reply(f"done: {turn.message.content}")

    adapter = Recorder(finish_when_released)
    result: list[StopResult] = []
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(shutdown_grace=8)) as running:
            posted = [platform.post_message(room, info.user_id, f"in {room}") for room in rooms]
            await adapter.wait_for(lambda: len(adapter.calls) == 3)
            # slow marks: a stop that does not wait for them cuts them off
            platform.faults.delay_rest("processed", 0.2, count=3)
            async with trio.open_nursery() as nursery:

                async def stop() -> None:
                    result.append(await running.agent.stop())

                nursery.start_soon(stop)
                await trio.testing.wait_all_tasks_blocked()
                release.set()  # every turn finishes inside the grace
    assert [status(platform, m) for m in posted] == ["processed"] * 3
    assert result[0].graceful and result[0].cancelled == ()
    # A restart must not answer them again: a fresh agent only sees what is new.
    again = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, again):
            newer = [platform.post_message(room, info.user_id, "newer") for room in rooms]
            await platform.wait_until(all_processed(platform, newer))
    assert again.calls == ["newer"] * 3


async def test_a_drop_during_the_room_list_reconnects_once(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    hold = platform.faults.hold_rest("chats")
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await hold.arrived.wait()  # the room list is in flight
            assert platform.faults.drop_socket(info.agent_id)
            await platform.wait_until(lambda: info.agent_id not in platform.connected_agents())
            hold.release()
            await run.started.wait()  # connected and joined, on the next connection
            message = platform.post_message(info.room_id, info.user_id, "still there?")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert ws_opens(platform) == 2  # the dropped one and exactly one reconnect


async def _silent_peer(stream: trio.SocketStream) -> None:
    """Accepts a TCP connection and never answers the websocket handshake."""
    async with stream:
        await trio.sleep_forever()


@pytest.mark.parametrize("route", ["me", "chats"])
async def test_stop_while_the_key_check_or_the_room_list_is_in_flight(
    platform: Platform, route: str
) -> None:
    hold = platform.faults.hold_rest(route)
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await hold.arrived.wait()
            result = await run.agent.stop()
            await run.finished.wait()
    assert result.graceful and run.error is None
    await platform.wait_until(lambda: not platform.connected_agents())
    if route == "me":
        assert ws_opens(platform) == 0  # it never went on to connect


async def test_stop_during_the_websocket_handshake(platform: Platform) -> None:
    accepted = trio.Event()

    async def silent(stream: trio.SocketStream) -> None:
        accepted.set()
        await _silent_peer(stream)

    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            (listener,) = await nursery.start(
                functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1")
            )
            port = listener.socket.getsockname()[1]
            async with background_agent(
                platform,
                Recorder(),
                policy=FAST,
                ws_url=f"ws://127.0.0.1:{port}/api/v1/socket/websocket",
            ) as run:
                await accepted.wait()
                result = await run.agent.stop()
                await run.finished.wait()
            nursery.cancel_scope.cancel()
    assert result.graceful and run.error is None


async def test_stop_while_the_upgrade_is_refused_and_retried(platform: Platform) -> None:
    platform.faults.refuse_upgrades(1000, 503)
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await platform.wait_until(lambda: platform.stats.get("upgrades_refused", 0) >= 2)
            result = await run.agent.stop()
            await run.finished.wait()
    assert result.graceful and run.error is None


async def test_stop_while_a_room_join_is_refused_and_retried(platform: Platform) -> None:
    info = platform.info
    assert info.room_id
    platform.faults.refuse_joins(f"chat_room:{info.room_id}")
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await platform.wait_until(lambda: platform.stats.get("faults_joins_refused", 0) >= 2)
            result = await run.agent.stop()
            await run.finished.wait()
    assert result.graceful and run.error is None
    await platform.wait_until(lambda: not platform.connected_agents())


async def test_one_room_refusing_its_rejoin_leaves_the_connection_and_the_others_alone(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.user_id
    healthy, refusing = rooms_with_the_agent(platform, 2)
    adapter = Recorder()
    policy = FAST.replace(join_refusals=3, join_retry_base=0.2)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            agent = running.agent
            platform.faults.refuse_joins(f"chat_room:{refusing}")
            assert platform.faults.drop_socket(info.agent_id)
            await agent.wait_until(lambda: not agent.connected)
            await agent.wait_until(lambda: agent.rooms[healthy].joined)  # on the new socket
            message = platform.post_message(healthy, info.user_id, "are you there?")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            assert refusing in agent.rooms  # still being retried, on its own
            await agent.wait_until(lambda: refusing not in agent.rooms)  # then given up
            await agent.wait_until(lambda: agent.connects == 2)
            assert healthy in agent.rooms
    assert ws_opens(platform) == 2  # one reconnect, not one per refusal
    assert adapter.calls == ["are you there?"]


async def test_a_drop_while_a_room_join_is_retried_reconnects_once(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    topic = f"chat_room:{info.room_id}"
    platform.faults.refuse_joins(topic)
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await platform.wait_until(lambda: platform.stats["faults_joins_refused"] >= 1)
            assert platform.faults.drop_socket(info.agent_id)
            await platform.wait_until(lambda: info.agent_id not in platform.connected_agents())
            platform.faults.allow_joins(topic)
            await run.started.wait()
            message = platform.post_message(info.room_id, info.user_id, "joined at last")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert ws_opens(platform) == 2


async def test_a_finished_turn_is_marked_even_when_the_shutdown_grace_is_over(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(shutdown_grace=0)) as running:
            hold = platform.faults.hold_rest("processed")
            message = platform.post_message(info.room_id, info.user_id, "answered")
            await hold.arrived.wait()  # the reply is posted; its mark is in flight
            async with trio.open_nursery() as nursery:
                nursery.start_soon(running.agent.stop)  # no grace: cancels the room at once
                await trio.testing.wait_all_tasks_blocked()
                hold.release()
    assert status(platform, message) == "processed"
    assert adapter.finished == ["answered"]
    assert running.stop_result is not None and running.stop_result.unsettled == ()


async def test_the_stop_result_lists_the_marks_that_could_not_be_delivered(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    adapter = Recorder()
    policy = Policy(rest_max_retries=0)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            platform.faults.fail_rest("processed", 503)
            message = platform.post_message(info.room_id, info.user_id, "mark me")
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.standing(message) == "ack_pending")
    result = running.stop_result
    assert result is not None
    assert result.unsettled == (UnsettledMark(info.room_id, message, "processed"),)
    assert status(platform, message) == "processing"
    # the same agent, run again, retries only the mark
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, agent=running.agent) as again:
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert adapter.calls == ["mark me"]
    assert again.agent.rooms == {}  # not running any more


async def test_a_stop_whose_caller_gives_up_still_stops_the_agent(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    release = trio.Event()

    async def finish_when_released(turn: Turn) -> None:
        await release.wait()
        await turn.reply("done")

    adapter = Recorder(finish_when_released)
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, adapter, policy=Policy(shutdown_grace=8)) as run:
            await run.started.wait()
            message = platform.post_message(info.room_id, info.user_id, "slow")
            await adapter.wait_for(lambda: adapter.calls == ["slow"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run.agent.stop)
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()  # the caller of stop() gives up
            release.set()
            await run.finished.wait()  # the stop goes on without it
            result = await run.agent.stop()  # and a later call gets its result
    assert result.graceful
    assert status(platform, message) == "processed"


async def test_a_crashed_room_loop_is_restarted_by_its_owner_with_a_log_line(
    platform: Platform, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    real = _room.run_one_turn
    crashes = 0

    async def crash_once(*args: Any) -> bool:
        nonlocal crashes
        if crashes == 0:
            crashes += 1
            raise RuntimeError("a bug in the room loop")
        return await real(*args)

    monkeypatch.setattr(_room, "run_one_turn", crash_once)
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            first = platform.post_message(info.room_id, info.user_id, "first")
            second = platform.post_message(info.room_id, info.user_id, "second")
            await platform.wait_until(lambda: status(platform, second) == "processed")
            assert info.room_id in running.agent.rooms  # the same room, still served
    restarts = [r for r in caplog.records if "room loop crashed" in r.getMessage()]
    assert len(restarts) == 1 and restarts[0].name == "band_trio.runtime.rooms"
    assert crashes == 1
    # the message whose unit crashed was never claimed; the restart caught up on it
    assert status(platform, first) == "processed"
    assert adapter.calls == ["first", "second"]


async def test_a_room_left_the_instant_its_adapter_returns_still_marks_the_message(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    agents: list[Agent] = []

    async def leave(room_id: str) -> None:
        rooms = agents[0]._rooms
        assert rooms is not None
        rooms.remove(room_id, "left as the adapter returned")

    async with trio.open_nursery() as test:

        async def leave_as_it_returns(turn: Turn) -> None:
            await turn.reply("done")
            # `leave` runs at the turn's next checkpoint, which comes after the adapter
            # has returned and before its settling: the cancel meets the turn in that
            # window, which no outside input can hit on purpose (hence the private
            # handle on the rooms host)
            test.start_soon(leave, turn.room_id)

        adapter = Recorder(leave_as_it_returns)
        with trio.fail_after(DEADLINE):
            async with running_agent(platform, adapter) as running:
                agents.append(running.agent)
                message = platform.post_message(info.room_id, info.user_id, "last words")
                await adapter.wait_for(lambda: info.room_id in adapter.left)
    assert adapter.finished == ["last words"]
    assert status(platform, message) == "processed"  # never answered again by a restart


async def test_a_turn_that_ignores_the_shutdown_is_reported_and_still_owned(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    finish = trio.Event()

    async def ignore_the_shutdown(turn: Turn) -> None:
        with trio.CancelScope(shield=True):  # stands in for cleanup that hangs
            await finish.wait()

    adapter = Recorder(ignore_the_shutdown)
    policy = Policy(shutdown_grace=0, cleanup_grace=0.05)
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, adapter, policy=policy) as run:
            await run.started.wait()
            message = platform.post_message(info.room_id, info.user_id, "stubborn")
            await adapter.wait_for(lambda: adapter.calls == ["stubborn"])
            result = await run.agent.stop()  # returns, with the overrun named...
            assert not run.finished.is_set()  # ...while run() still owns the turn
            finish.set()
            await run.finished.wait()
    assert not result.graceful
    assert result.cancelled == ((info.room_id, message),)
    assert [(o.room_id, o.message_id, o.what) for o in result.overran] == [
        (info.room_id, message, "ignored the shutdown")
    ]
    # it returned in the end, but after the shutdown had cancelled it: not a success
    assert status(platform, message) == "processing"
