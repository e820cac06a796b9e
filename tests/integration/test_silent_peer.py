"""An adapter whose peer accepts the request and never answers cannot hold the agent.

The A2A adapter's start (the request and its first event) runs shielded; from
the turn's abort on it gets `backend_stop_grace`. Every canceller of a turn
records the abort before it cancels — interrupt and stop, the room's leave, the
shutdown after its grace, the hard stop, and a cancel from outside the agent —
so each ends the turn within that grace (issue 21). Before, a cancel from
outside (a caller's deadline around `Agent.run`) left the start shielded until
httpx2's 300 s backstop, and there was no hard stop to call.

The clock is the autojump clock: the bounds are read off virtual time, and
"never" costs nothing.
"""

from __future__ import annotations

import pytest
import trio

from band_trio import Policy
from band_trio.adapters import A2AAdapter
from band_trio.platform import Platform
from peers import SilentPeer, silent_peer
from support import agent_for, background_agent, running_agent, seeded, status

GRACE = 2.0
POLICY = Policy(backend_stop_grace=GRACE, shutdown_grace=1.0, hard_stop_grace=0.2)
MARGIN = 1.0


async def held(platform: Platform, peer: SilentPeer) -> str:
    _, room, user = seeded(platform)
    message = platform.post_message(room, user, "hello")
    await peer.wait_requests(1)
    return message


async def test_a_callers_deadline_around_run_ends_a_held_start_within_the_grace(
    platform: Platform, autojump_clock: object
) -> None:
    async with silent_peer() as peer:
        agent = agent_for(platform, A2AAdapter(peer.url, streaming=True), policy=POLICY)
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def run() -> None:
                with scope:
                    await agent.run()

            nursery.start_soon(run)
            message = await held(platform, peer)
            cancelled = trio.current_time()
            scope.cancel()  # not the agent's own stop: a caller gave up on it
        assert trio.current_time() - cancelled <= GRACE + MARGIN
    assert status(platform, message) == "processing"


async def test_the_hard_stop_ends_a_held_start_within_the_hard_stop_grace(
    platform: Platform, autojump_clock: object
) -> None:
    async with (
        silent_peer() as peer,
        background_agent(platform, A2AAdapter(peer.url, streaming=True), policy=POLICY) as bg,
    ):
        await bg.started.wait()
        message = await held(platform, peer)
        stopped = trio.current_time()
        bg.agent.hard_stop("test")
        await bg.finished.wait()
        assert trio.current_time() - stopped <= POLICY.hard_stop_grace + 0.1
        assert bg.error is None
    assert status(platform, message) == "processing"


async def test_a_graceful_stop_past_its_grace_ends_a_held_start_within_the_stop_grace(
    platform: Platform, autojump_clock: object
) -> None:
    async with silent_peer() as peer:
        async with running_agent(
            platform, A2AAdapter(peer.url, streaming=True), policy=POLICY
        ) as running:
            message = await held(platform, peer)
            stopped = trio.current_time()
            result = await running.agent.stop()
            assert trio.current_time() - stopped <= POLICY.shutdown_grace + GRACE + MARGIN
        assert [m for _, m in result.cancelled] == [message]
    assert status(platform, message) == "processing"


@pytest.mark.parametrize("signal", ["interrupt", "leave"])
async def test_an_interrupt_or_a_leave_ends_a_held_start_within_the_stop_grace(
    platform: Platform, autojump_clock: object, signal: str
) -> None:
    agent_id, room, _ = seeded(platform)
    async with (
        silent_peer() as peer,
        running_agent(platform, A2AAdapter(peer.url, streaming=True), policy=POLICY) as running,
    ):
        message = await held(platform, peer)
        aborted = trio.current_time()
        if signal == "interrupt":
            platform.send_control(agent_id, "interrupt", room_id=room)
        else:
            platform.remove_participant(room, agent_id)
        agent = running.agent
        await agent.wait_until(lambda: room not in agent.rooms or not agent.rooms[room].running)
        assert trio.current_time() - aborted <= GRACE + MARGIN
    assert status(platform, message) == ("processed" if signal == "interrupt" else "processing")
