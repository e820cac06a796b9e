"""A stop that outlives the agent, seen from `band-trio agent` as a real process.

An agent-wide stop sent while no agent is connected closes the platform's gate
for every room; a restarted agent then has every claim there answered 204. The
first one in each room says so on stderr at the default log level, once, with
the way out (`band-trio ctl play`); the play then answers what waited.
"""

from __future__ import annotations

import signal

import trio
from test_agent_process import stderr_of
from test_commands import process, read_until

from band_trio.platform import Platform
from support import agent_env, all_processed, claims, status

DEADLINE = 30
SAYS = b"the platform holds this room stopped"


def asked_next(platform: Platform, room_id: str) -> bool:
    """Whether the agent has asked `/next` in the room: it has joined it, so a message
    posted now is pushed (and claimed), not only found by a `/next` answered 204."""
    path = f"/chats/{room_id}/messages/next"
    return any(e.kind == "rest" and (e.path or "").endswith(path) for e in platform.log())


async def test_a_restarted_agent_says_once_per_room_that_the_room_is_stopped(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.user_id and info.agent_id and info.room_id
    room = info.room_id
    platform.send_control(info.agent_id, "stop")  # agent-wide, to no socket
    env = agent_env(platform)
    with trio.fail_after(DEADLINE):
        async with process("agent", env=env) as proc:
            assert proc.stderr is not None
            await platform.wait_until(lambda: asked_next(platform, room))  # joined: pushed
            first = platform.post_message(info.room_id, info.user_id, "anyone?")
            seen = await read_until(proc.stderr, b"ctl play")
            second = platform.post_message(info.room_id, info.user_id, "hello?")
            await platform.wait_until(lambda: claims(platform, second) >= 1)
            proc.send_signal(signal.SIGTERM)  # the unit in hand (the refused claim) ends first
            assert await proc.wait() == 0
            seen += await stderr_of(proc)
        lines = [line for line in seen.decode().splitlines() if SAYS.decode() in line]
        assert len(lines) == 1, seen.decode()
        assert info.room_id in lines[0] and "WARNING" in lines[0], lines
        assert "`band-trio ctl play`" in lines[0], lines
        assert b"Traceback" not in seen
        assert [status(platform, first), status(platform, second)] == ["delivered"] * 2

        async with process("agent", env=env) as again:  # the play answers what waited
            await platform.wait_until(lambda: info.agent_id in platform.connected_agents())
            platform.send_control(info.agent_id, "play")
            await platform.wait_until(all_processed(platform, [first, second]))
            again.send_signal(signal.SIGTERM)
            assert await again.wait() == 0
            assert SAYS not in await stderr_of(again)  # no claim was refused this time
