"""A message that arrives while a turn runs (double texting), per strategy.

`enqueue` (the default) waits its turn; `busy` answers at once and keeps the
message queued; `interrupt` aborts the running turn as an interrupt (consumed,
remote work stopped) and runs next — a burst interrupts once and runs in
order. Per-room overrides win over the agent's strategy.
"""

from __future__ import annotations

import trio

from band_trio import StopOutcome, Turn, WhileBusy
from band_trio.platform import Platform
from band_trio.policy import BusyPolicy
from support import Recorder, all_processed, replies, running_agent, seeded, status

DEADLINE = 10
BUSY_NOTICE = BusyPolicy().notice


class Slow:
    """The first message waits until released (or aborted); the rest answer at once."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.stops: list[str] = []

    async def __call__(self, turn: Turn) -> None:
        if turn.message.content == "long":

            async def stop(handle: str) -> StopOutcome:
                self.stops.append(handle)
                return StopOutcome.CONFIRMED

            async with turn.remote(stop=stop, name="job") as work:
                work.started("job-1")
                await self.release.wait()
        await turn.reply(f"done: {turn.message.content}")


def pushed(platform: Platform, message_ids: list[str]) -> bool:
    """Whether the platform has written a `message_created` frame for each message."""
    frames = [e.frame or "" for e in platform.log() if e.kind == "ws_out"]
    return all(
        any(m in frame and "message_created" in frame for frame in frames) for m in message_ids
    )


async def test_enqueue_lets_the_new_message_wait_its_turn(platform: Platform) -> None:
    _, room, user = seeded(platform)
    slow = Slow()
    adapter = Recorder(slow)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as handle:
            assert handle.agent.while_busy.default is WhileBusy.ENQUEUE
            long = platform.post_message(room, user, "long")
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            short = platform.post_message(room, user, "short")
            slow.release.set()
            await platform.wait_until(lambda: status(platform, short) == "processed")
    assert status(platform, long) == "processed"
    assert replies(platform, room) == ["done: long", "done: short"]
    assert adapter.cancelled == []


async def test_busy_answers_at_once_and_keeps_the_message_queued(platform: Platform) -> None:
    _, room, user = seeded(platform)
    slow = Slow()
    adapter = Recorder(slow)
    agent_strategy = BusyPolicy(default="busy")  # type: ignore[arg-type]
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=agent_strategy):
            platform.post_message(room, user, "long")
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            short = platform.post_message(room, user, "short")
            await platform.wait_until(lambda: BUSY_NOTICE in replies(platform, room))
            assert status(platform, short) == "delivered"  # queued, not run, not dropped
            assert adapter.calls == ["long"]
            slow.release.set()
            await platform.wait_until(lambda: status(platform, short) == "processed")
    assert replies(platform, room) == [BUSY_NOTICE, "done: long", "done: short"]


async def test_interrupt_aborts_the_running_turn_and_runs_the_new_message(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    slow = Slow()
    adapter = Recorder(slow)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.INTERRUPT) as handle:
            long = platform.post_message(room, user, "long")
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            short = platform.post_message(room, user, "short")
            await platform.wait_until(lambda: status(platform, short) == "processed")
            stops = handle.agent.remote_stops
    assert status(platform, long) == "processed"  # consumed, as an interrupt
    assert adapter.cancelled == ["long"]
    assert slow.stops == ["job-1"]  # its remote work stopped
    assert stops.confirmed == 1
    assert replies(platform, room) == ["done: short"]


async def test_a_burst_during_one_turn_interrupts_once_and_runs_in_order(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    slow = Slow()
    adapter = Recorder(slow)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.INTERRUPT):
            platform.post_message(room, user, "long")
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            # hold the interrupted turn's consume mark, so the whole burst lands during it
            hold = platform.faults.hold_rest("processed")
            burst = [platform.post_message(room, user, "a")]
            await hold.arrived.wait()
            burst += [platform.post_message(room, user, text) for text in ("b", "c")]
            await platform.wait_until(lambda: pushed(platform, burst))
            hold.release()
            await platform.wait_until(all_processed(platform, burst))
    assert adapter.calls == ["long", "a", "b", "c"]
    assert adapter.cancelled == ["long"]  # one interrupt for the burst
    assert replies(platform, room) == ["done: a", "done: b", "done: c"]


async def test_a_rooms_override_wins_over_the_agents_strategy(platform: Platform) -> None:
    agent_id, _, user = seeded(platform)
    other = platform.create_room(title="other", participants=[user, agent_id]).id
    assert other
    slow = Slow()
    adapter = Recorder(slow)
    strategy = BusyPolicy(default=WhileBusy.INTERRUPT, rooms={other: WhileBusy.ENQUEUE})
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=strategy):
            platform.post_message(other, user, "long")
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            short = platform.post_message(other, user, "short")
            with trio.move_on_after(0.3):
                await adapter.wait_for(lambda: bool(adapter.cancelled))
            assert adapter.cancelled == []  # enqueued in this room
            slow.release.set()
            await platform.wait_until(lambda: status(platform, short) == "processed")
    assert replies(platform, other) == ["done: long", "done: short"]


async def test_a_message_during_an_aborted_turns_settling_gets_no_busy_notice(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    adapter = Recorder(Slow())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.BUSY):
            platform.post_message(room, user, "long")
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            hold = platform.faults.hold_rest("processed")
            platform.send_control(agent_id, "interrupt", room_id=room)
            await hold.arrived.wait()  # the interrupted turn is settling, no longer running
            late = platform.post_message(room, user, "late")
            await platform.wait_until(lambda: pushed(platform, [late]))
            hold.release()
            await platform.wait_until(lambda: status(platform, late) == "processed")
    assert replies(platform, room) == ["done: late"]
