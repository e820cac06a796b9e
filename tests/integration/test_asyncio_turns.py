"""asyncio code in an agent's turns (`run_asyncio`), on the embedded platform over real
loopback sockets: the room's interrupt and stop reach the asyncio task, and a task
that ignores its cancel is reported and does not outlive the agent (issue 40, item 1).
"""

from __future__ import annotations

import asyncio
import threading

import trio

from band_trio import Policy, StopOutcome, Turn
from band_trio.contract import run_asyncio
from band_trio.platform import Platform
from support import Recorder, replies, running_agent, seeded, status

DEADLINE = 10
FAST = Policy(backend_stop_grace=0.3, cleanup_grace=1.0, shutdown_grace=0.2)


class AsyncioSide:
    """What the asyncio code did, told to the trio side (its events are set in the
    trio thread, through the token)."""

    def __init__(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self.started = trio.Event()
        self.cleaned_up = trio.Event()
        self.release = threading.Event()

    def tell(self, event: trio.Event) -> None:
        self.token.run_sync_soon(event.set)


async def test_an_interrupt_cancels_the_asyncio_task_and_the_room_goes_on(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    side = AsyncioSide()

    async def model(prompt: str) -> str:  # an asyncio framework's call
        if prompt == "long":
            side.tell(side.started)
            try:
                await asyncio.sleep(60)
            finally:
                side.tell(side.cleaned_up)
        await asyncio.sleep(0)
        return f"asyncio says: {prompt}"

    async def behaviour(turn: Turn) -> None:
        await turn.reply(await run_asyncio(model, turn.message.content))

    adapter = Recorder(behaviour)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            long = platform.post_message(room, user, "long")
            await side.started.wait()
            platform.send_control(agent_id, "interrupt", room_id=room)
            await side.cleaned_up.wait()
            await platform.wait_until(lambda: status(platform, long) == "processed")
            quick = platform.post_message(room, user, "quick")
            await platform.wait_until(lambda: status(platform, quick) == "processed")
            stop = running.agent.remote_stops.recent[-1]
    assert replies(platform, room) == ["asyncio says: quick"]
    assert adapter.cancelled == ["long"]
    assert (stop.name, stop.outcome) == ("asyncio task", StopOutcome.CONFIRMED)
    assert running.stop_result is not None and running.stop_result.graceful
    assert not [t for t in threading.enumerate() if t.name == "band-trio asyncio"]


async def test_a_task_that_ignores_the_stop_is_in_the_stop_result_and_ends_with_the_agent(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    side = AsyncioSide()

    async def deaf() -> None:
        side.tell(side.started)
        try:
            while True:
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    if side.release.is_set():  # the agent's exit: it gives in
                        raise
                    side.release.set()  # the turn's cancel: swallowed (wrong, but it happens)
        finally:
            side.tell(side.cleaned_up)

    async def behaviour(turn: Turn) -> None:
        await run_asyncio(deaf)

    adapter = Recorder(behaviour)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=FAST) as running:
            message = platform.post_message(room, user, "deaf")
            await side.started.wait()
            platform.send_control(agent_id, "stop", room_id=room)
            await running.agent.wait_until(lambda: running.agent.rooms[room].running is None)
            assert not side.cleaned_up.is_set()  # the turn went on without it
            stop = running.agent.remote_stops.recent[-1]
            assert running.agent.threads.running == 0  # no worker thread: its own loop
    assert side.cleaned_up.is_set()  # cancelled again, and waited for, as the agent ended
    assert stop.outcome is StopOutcome.UNCONFIRMED
    assert "ignored its cancel" in stop.detail
    assert status(platform, message) == "processing"  # stop keeps the message for play
    result = running.stop_result
    assert result is not None and not result.graceful
    (overrun,) = result.overran
    assert (overrun.room_id, overrun.message_id) == (room, message)
    assert "asyncio task" in overrun.what and "deaf" in overrun.what
    assert not [t for t in threading.enumerate() if t.name == "band-trio asyncio"]
