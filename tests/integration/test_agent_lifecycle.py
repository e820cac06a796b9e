"""The agent's own lifecycle: start-up, graceful stop and reconnects, in every phase.

Each test here holds one rule of semantics.md §1, §2 and §6 that lives above
the turn, and each began as a defect found by trying the agent as a new user
would (see the changelog).
"""

from __future__ import annotations

import functools

import trio

from band_trio import Policy, StopResult, Turn
from band_trio.platform import Platform
from support import Recorder, background_agent, running_agent, status

DEADLINE = 10
FAST = Policy(reconnect_base=0.02, reconnect_cap=0.1, room_restart_base=0.05)


def ws_opens(platform: Platform) -> int:
    """Accepted websocket upgrades so far."""
    return sum(1 for e in platform.log() if e.kind == "ws_open" and e.status == 101)


def more_rooms(platform: Platform, count: int) -> list[str]:
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    return [info.room_id] + [
        platform.create_room(title=f"room {i}", participants=[info.user_id, info.agent_id]).id or ""
        for i in range(count - 1)
    ]


async def test_a_graceful_stop_sends_the_marks_of_turns_that_finish_inside_the_grace(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.user_id
    rooms = more_rooms(platform, 3)
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
            await platform.wait_until(
                lambda: all(status(platform, m) == "processed" for m in newer)
            )
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


async def test_stop_before_the_key_is_checked(platform: Platform) -> None:
    hold = platform.faults.hold_rest("me")
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await hold.arrived.wait()
            result = await run.agent.stop()
            await run.finished.wait()
    assert result.graceful and run.error is None
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


async def test_stop_while_the_room_list_is_in_flight(platform: Platform) -> None:
    hold = platform.faults.hold_rest("chats")
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await hold.arrived.wait()
            result = await run.agent.stop()
            await run.finished.wait()
    assert result.graceful and run.error is None
    await platform.wait_until(lambda: not platform.connected_agents())


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
    healthy, refusing = more_rooms(platform, 2)
    adapter = Recorder()
    policy = FAST.replace(join_refusals=3)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            agent = running.agent
            platform.faults.refuse_joins(f"chat_room:{refusing}")
            assert platform.faults.drop_socket(info.agent_id)
            await agent.wait_until(lambda: agent.connects == 2)
            message = platform.post_message(healthy, info.user_id, "are you there?")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            await agent.wait_until(lambda: refusing not in agent.rooms)  # given up
            assert healthy in agent.rooms
    assert ws_opens(platform) == 2  # one reconnect, not one per refusal
    assert adapter.calls == ["are you there?"]
