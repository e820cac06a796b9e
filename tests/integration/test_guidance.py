"""`WhileBusy.STEER` over real loopback sockets: guidance offered, taken, or run after.

A message that arrives while a turn runs is offered to it. Taken, it is the
turn's: claimed at once, marked with the turn, never answered alone; an
interrupt consumes it with the turn, a stop leaves it for the replay. Not taken,
it runs as its own turn afterwards, in order. Nothing lost, nothing twice.
"""

from __future__ import annotations

import trio
from test_while_busy import pushed

from band_trio import Policy, Turn, WhileBusy
from band_trio.platform import Platform
from support import Recorder, claims, errors_posted, replies, running_agent, seeded, status

DEADLINE = 10


class Steered:
    """`long` waits for guidance (taking `take` messages) or a release; the rest echo."""

    def __init__(self, take: int = 1) -> None:
        self.take = take
        self.release = trio.Event()
        self.taken: list[str] = []

    async def __call__(self, turn: Turn) -> None:
        if turn.message.content == "long":
            while len(self.taken) < self.take:
                self.taken += [m.content for m in await turn.next_guidance()]
            await self.release.wait()
        await turn.reply(f"done: {turn.message.content} {self.taken if self.taken else ''}")


async def test_taken_guidance_is_marked_with_the_turn_and_never_answered_alone(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    steered = Steered(take=2)
    adapter = Recorder(steered)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            long = platform.post_message(room, user, "long", mentions=[agent])
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            first = platform.post_message(room, user, "use tabs", mentions=[agent])
            second = platform.post_message(room, user, "and be brief", mentions=[agent])
            await platform.wait_until(lambda: claims(platform, second) == 1)  # claimed when taken
            assert status(platform, first) == "processing"
            steered.release.set()
            await platform.wait_until(lambda: status(platform, long) == "processed")
            await platform.wait_until(lambda: status(platform, second) == "processed")
    assert status(platform, first) == "processed"
    assert steered.taken == ["use tabs", "and be brief"]
    assert adapter.calls == ["long"]
    assert replies(platform, room) == ["done: long ['use tabs', 'and be brief']"]


async def test_guidance_not_taken_runs_afterwards_in_order(platform: Platform) -> None:
    agent, room, user = seeded(platform)
    release = trio.Event()

    async def never_takes(turn: Turn) -> None:
        if turn.message.content == "long":
            await release.wait()
        await turn.reply(f"done: {turn.message.content}")

    adapter = Recorder(never_takes)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            platform.post_message(room, user, "long", mentions=[agent])
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            later = [platform.post_message(room, user, t, mentions=[agent]) for t in "abc"]
            await platform.wait_until(lambda: pushed(platform, later))
            assert {status(platform, m) for m in later} == {"delivered"}  # offered, not claimed
            release.set()
            await platform.wait_until(lambda: status(platform, later[-1]) == "processed")
    assert adapter.calls == ["long", "a", "b", "c"]  # exactly as `enqueue`
    assert replies(platform, room) == ["done: long", "done: a", "done: b", "done: c"]


async def test_an_interrupt_consumes_taken_guidance_and_runs_the_untaken(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    steered = Steered(take=1)
    adapter = Recorder(steered)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            long = platform.post_message(room, user, "long", mentions=[agent])
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            taken = platform.post_message(room, user, "hint", mentions=[agent])
            await platform.wait_until(lambda: claims(platform, taken) == 1)
            untaken = platform.post_message(room, user, "next", mentions=[agent])
            await platform.wait_until(lambda: pushed(platform, [untaken]))
            platform.send_control(agent, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, untaken) == "processed")
    assert status(platform, long) == "processed"  # consumed
    assert status(platform, taken) == "processed"  # consumed with it
    assert adapter.cancelled == ["long"]
    assert adapter.calls == ["long", "next"]
    assert replies(platform, room) == ["done: next ['hint']"]


async def test_a_stop_leaves_taken_guidance_for_the_replay_in_order(platform: Platform) -> None:
    agent, room, user = seeded(platform)
    steered = Steered(take=1)
    adapter = Recorder(steered)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            long = platform.post_message(room, user, "long", mentions=[agent])
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            hint = platform.post_message(room, user, "hint", mentions=[agent])
            await platform.wait_until(lambda: claims(platform, hint) == 1)
            platform.send_control(agent, "stop", room_id=room)
            await adapter.wait_for(lambda: adapter.cancelled == ["long"])
            assert (status(platform, long), status(platform, hint)) == ("processing", "processing")
            steered.taken.clear()
            steered.release.set()
            steered.take = 0  # the replay runs on without waiting for guidance
            platform.send_control(agent, "play", room_id=room)
            await platform.wait_until(lambda: status(platform, hint) == "processed")
    assert status(platform, long) == "processed"
    assert adapter.calls == ["long", "long", "hint"]  # replayed in order, each once more
    assert replies(platform, room) == ["done: long ", "done: hint "]


async def test_guidance_across_a_reconnect_is_taken_or_run_once_each(platform: Platform) -> None:
    agent, room, user = seeded(platform)
    release = trio.Event()
    taken: list[str] = []

    async def takes_at_the_end(turn: Turn) -> None:
        if turn.message.content == "long":
            taken.extend(m.content for m in turn.take_guidance())  # before the drop
            await release.wait()
            taken.extend(m.content for m in turn.take_guidance())  # after it
        await turn.reply(f"done: {turn.message.content}")

    adapter = Recorder(takes_at_the_end)
    fast = Policy(reconnect_base=0.02, reconnect_cap=0.1)
    with trio.fail_after(DEADLINE):
        async with running_agent(
            platform, adapter, policy=fast, while_busy=WhileBusy.STEER
        ) as running:
            platform.post_message(room, user, "long", mentions=[agent])
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            before = platform.post_message(room, user, "before", mentions=[agent])
            await platform.wait_until(lambda: pushed(platform, [before]))
            assert platform.faults.drop_socket(agent)
            await running.agent.wait_until(lambda: running.agent.connects == 2)
            after = platform.post_message(room, user, "after", mentions=[agent])
            await platform.wait_until(lambda: pushed(platform, [after]))
            release.set()
            await platform.wait_until(lambda: status(platform, before) == "processed")
            await platform.wait_until(lambda: status(platform, after) == "processed")
    assert taken == ["after"]  # "before" was dropped with the queue on the rejoin...
    assert adapter.calls == ["long", "before"]  # ...and ran as its own turn, once
    assert claims(platform, before) == 1 and claims(platform, after) == 1


async def test_a_failed_turn_fails_what_it_took_with_one_error_event(platform: Platform) -> None:
    agent, room, user = seeded(platform)

    async def takes_then_fails(turn: Turn) -> None:
        await turn.next_guidance()
        raise RuntimeError("the tool broke")

    adapter = Recorder(takes_then_fails)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            long = platform.post_message(room, user, "long", mentions=[agent])
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            hint = platform.post_message(room, user, "hint", mentions=[agent])
            await platform.wait_until(lambda: status(platform, hint) == "failed")
    assert status(platform, long) == "failed"
    assert adapter.calls == ["long"]  # the guidance is never run again
    assert len(errors_posted(platform, room)) == 1  # the turn's; its guidance shares it
