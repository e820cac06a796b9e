"""A graceful stop at scale: every mark sent, and the topics left by one close of the socket.

Closing the websocket leaves every topic of the connection at once (the
platform forgets a closed connection's joins: docs/reference/platform.md), so
a stopping agent does not leave its rooms' topics one by one, awaiting a reply
for each (20,000 round trips at 10,000 rooms). A room left while the agent
runs still leaves its topics (tests/integration/test_rooms.py).
"""

from __future__ import annotations

import trio

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, rooms_with_the_agent, running_agent, status

DEADLINE = 10


def frames_since(platform: Platform, position: int, needle: str) -> list[str]:
    return [
        entry.frame
        for entry in platform.log(position)
        if entry.kind == "ws_in" and entry.frame and needle in entry.frame
    ]


async def test_a_graceful_stop_marks_every_turn_and_leaves_with_one_close(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.user_id and info.agent_id
    rooms = rooms_with_the_agent(platform, 6)
    release = trio.Event()

    async def finish_when_released(turn: Turn) -> None:
        await release.wait()
        await turn.reply(f"done: {turn.message.content}")

    adapter = Recorder(finish_when_released)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(shutdown_grace=8)) as running:
            posted = [platform.post_message(room, info.user_id, f"in {room}") for room in rooms[:3]]
            await adapter.wait_for(lambda: len(adapter.calls) == 3)
            position = platform.request_log.next_seq
            release.set()  # the turns end during the stop's grace (running_agent stops now)
    assert running.stop_result is not None and running.stop_result.graceful
    assert [status(platform, m) for m in posted] == ["processed"] * 3  # nothing unmarked
    assert frames_since(platform, position, '"phx_leave"') == []  # no leave per topic
    closes = [e for e in platform.log(position) if e.kind == "ws_close"]
    assert [e.agent_id for e in closes] == [info.agent_id]  # one close of the one socket
    assert info.agent_id not in platform.connected_agents()  # every join forgotten with it
    assert sorted(adapter.left) == sorted(rooms)  # the adapter is still told of each room
