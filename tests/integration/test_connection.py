"""Connection lifecycle against the platform's fault injection (docs/discussion/connection.md)."""

from __future__ import annotations

import os

import msgspec
import pytest
import trio

from band_trio import AgentDisconnectedError, Policy
from band_trio.errors import DisconnectReason
from band_trio.platform import Platform
from support import (
    Background,
    Recorder,
    agent_for,
    background_agent,
    client_sockets,
    running_agent,
    status,
)

DEADLINE = 10
FAST = Policy(reconnect_base=0.02, reconnect_cap=0.1)


def ws_opens(platform: Platform) -> list[float]:
    """perf_counter stamps of the accepted websocket upgrades."""
    return [e.t for e in platform.log() if e.kind == "ws_open" and e.status == 101]


def joins(platform: Platform, since: int = 0) -> list[tuple[str, str]]:
    """(join_ref, topic) of every phx_join the platform received."""
    found = []
    for entry in platform.log(since):
        if entry.kind == "ws_in" and entry.frame and '"phx_join"' in entry.frame:
            join_ref, _, topic, _, _ = msgspec.json.decode(entry.frame)
            found.append((join_ref, topic))
    return found


async def test_a_dropped_socket_reconnects_rejoins_reconciles_and_resyncs(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            agent = running.agent
            before = joins(platform)
            mark = len(platform.log())
            platform.faults.refuse_upgrades(2, 503)  # keep it down for a moment
            assert platform.faults.drop_socket(info.agent_id)
            await agent.wait_until(lambda: not agent.connected)
            # while it is away: a message, a new room, and a room it is removed from
            missed = platform.post_message(info.room_id, info.user_id, "while you were away")
            new_room = platform.create_room(title="new", participants=[info.user_id, info.agent_id])
            gone = platform.create_room(title="gone", participants=[info.user_id])
            await agent.wait_until(lambda: agent.connects == 2)
            await platform.wait_until(lambda: status(platform, missed) == "processed")
            await agent.wait_until(lambda: new_room.id in agent.rooms)
            after = joins(platform, mark)
    assert gone.id and gone.id not in agent.rooms
    topics_before = {topic for _, topic in before}
    assert {topic for _, topic in after} >= topics_before  # every topic rejoined
    assert not {ref for ref, _ in after} & {ref for ref, _ in before}  # with fresh join_refs
    assert f"chat_room:{new_room.id}" in {topic for _, topic in after}
    assert adapter.calls == ["while you were away"]


@pytest.mark.parametrize("code", [1000, 1001, 4001])
async def test_any_close_that_is_not_final_reconnects(platform: Platform, code: int) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(), policy=FAST) as running:
            assert platform.faults.close_socket(info.agent_id, code, "bye")
            await running.agent.wait_until(lambda: running.agent.connects == 2)
            assert running.agent.last_disconnect_reason is None


async def test_a_refused_upgrade_honours_retry_after(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(), policy=FAST) as running:
            platform.faults.refuse_upgrades(1, 429, retry_after=0.3)
            assert platform.faults.drop_socket(info.agent_id)
            await running.agent.wait_until(lambda: running.agent.connects == 2)
    refused = [e.t for e in platform.log() if e.kind == "ws_open" and e.status == 429]
    accepted = ws_opens(platform)
    assert len(refused) == 1
    assert accepted[-1] - refused[0] >= 0.3  # not before the platform said


async def test_unanswered_heartbeats_close_and_reconnect(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    info = platform.info
    assert info.agent_id
    policy = FAST.replace(heartbeat_interval=0.05, heartbeat_dead_after=0.2)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(), policy=policy) as running:
            platform.faults.mute_heartbeats(info.agent_id)
            await running.agent.wait_until(lambda: not running.agent.connected)
            platform.faults.mute_heartbeats(info.agent_id, muted=False)
            await running.agent.wait_until(lambda: running.agent.connects == 2)
    dead = [r for r in caplog.records if "no heartbeat reply" in r.getMessage()]
    assert len(dead) == 1 and dead[0].name == "band_trio.link.socket"


def disconnected(run: Background) -> DisconnectReason:
    """The reason `run()` raised `AgentDisconnectedError` with (bare, not in a group)."""
    assert isinstance(run.error, AgentDisconnectedError), run.error
    return run.error.reason


async def test_a_supersede_that_is_not_retryable_is_final(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await run.started.wait()
            correlation = platform.faults.supersede(info.agent_id, message="replaced")
            await run.finished.wait()
    reason = disconnected(run)
    assert (reason.reason, reason.message, reason.retryable) == ("superseded", "replaced", False)
    assert reason.correlation_id == correlation
    assert run.agent.last_disconnect_reason == reason  # kept after the run
    assert len(ws_opens(platform)) == 1  # and never reconnected


async def test_a_close_with_1008_is_final(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await run.started.wait()
            platform.faults.close_socket(info.agent_id, 1008, "policy violation")
            await run.finished.wait()
    reason = disconnected(run)
    assert (reason.reason, reason.message) == ("close_1008", "policy violation")
    assert len(ws_opens(platform)) == 1


@pytest.mark.parametrize("refused", [400, 401, 403, 409])
async def test_an_upgrade_refused_for_good_stops_reconnecting(
    platform: Platform, refused: int
) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as run:
            await run.started.wait()
            platform.faults.refuse_upgrades(100, refused, retry_after=7)
            assert platform.faults.drop_socket(info.agent_id)
            await run.finished.wait()
    reason = disconnected(run)
    assert reason.reason and not reason.retryable
    assert reason.retry_after == 7
    refusals = [e for e in platform.log() if e.kind == "ws_open" and e.status == refused]
    assert len(refusals) == 1  # tried once, not forever


async def test_an_upgrade_refused_for_good_at_start_up_raises_out_of_run(
    platform: Platform,
) -> None:
    platform.faults.refuse_upgrades(100, 400)
    agent = agent_for(platform, Recorder(), policy=FAST)
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            with pytest.raises(AgentDisconnectedError):  # bare, from nursery.start
                await nursery.start(agent.run)
    assert not agent.running


async def test_the_disconnect_reason_is_cleared_by_the_next_fresh_connect(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, Recorder(), policy=FAST) as first:
            await first.started.wait()
            platform.faults.supersede(info.agent_id)
            await first.finished.wait()
        agent = first.agent
        assert agent.last_disconnect_reason is not None
        async with background_agent(platform, agent=agent) as second:  # the same agent again
            await second.started.wait()
            assert agent.last_disconnect_reason is None
            assert (await agent.stop()).graceful


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs /proc/net/tcp")
async def test_no_client_socket_is_left_open_by_closes_drops_and_reconnects(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id
    port = int(info.rest_url.rsplit(":", 1)[1])
    assert client_sockets(port) == 0
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(), policy=FAST) as running:
            assert client_sockets(port) >= 1  # the counter sees the agent's sockets
            for fault in range(6):
                if fault % 2:
                    platform.faults.close_socket(info.agent_id, 1000)  # server-initiated close
                else:
                    platform.faults.drop_socket(info.agent_id)
                await running.agent.wait_until(lambda f=fault: running.agent.connects == f + 2)
            # every replaced connection's socket is closed already, not left for the GC
            assert client_sockets(port) <= 1 + len(running.agent.rooms) + 2
    assert client_sockets(port) == 0
