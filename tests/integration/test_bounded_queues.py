"""A room's queue is bounded (`Policy.room_inbox`): past it the queued pushes are dropped
and a `/next` pass finds the same messages, in order — none lost, none twice (issue 21,
item 9). Before, every push while a turn ran was kept, without a limit."""

from __future__ import annotations

import trio

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, all_processed, replies, running_agent, seeded

DEADLINE = 20


async def test_a_flood_while_a_turn_runs_is_caught_up_through_next_in_order(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    release = trio.Event()

    async def behaviour(turn: Turn) -> None:
        if turn.message.content == "first":
            await release.wait()
        await turn.reply(f"echo: {turn.message.content}")

    adapter = Recorder(behaviour)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(room_inbox=5)) as running:
            first = platform.post_message(room, user, "first")
            await adapter.wait_for(lambda: adapter.calls == ["first"])
            flood = [platform.post_message(room, user, f"m{n}") for n in range(12)]
            view = running.agent.rooms[room]
            # 5 queued, the 6th drops them (and is queued), 4 more, the 11th drops again
            await running.agent.wait_until(lambda: (view.overflowed, view.queued) == (2, 2))
            release.set()
            await platform.wait_until(all_processed(platform, [first, *flood]))
    assert replies(platform, room) == ["echo: first"] + [f"echo: m{n}" for n in range(12)]
