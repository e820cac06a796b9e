"""An agent paces its room joins: at most `Policy.join_window` rooms join at once on a
connection (issue 38, item 6).

Before, a connection sent every room's join at once: an agent in 10,000 rooms put
10,000 joins on the wire, and a platform that queued the replies without limit of its
own — the embedded one with its default queue, before it pushed back — cut the socket
off (1011) and the agent never joined. The window keeps the replies a platform holds for
the agent to about the window, whatever the number of rooms, so a queue of 16 never
fills for 300 rooms (600 joins).
"""

from __future__ import annotations

import pytest
import trio

from band_trio import Policy
from band_trio.platform import open_platform
from band_trio.policy import PlatformPolicy
from support import Recorder, rooms_with_the_agent, running_agent

ROOMS = 300
QUEUE = 16


async def test_an_agent_in_300_rooms_never_fills_a_queue_of_16() -> None:
    async with open_platform(seed=True, policy=PlatformPolicy(outbound_queue=QUEUE)) as platform:
        rooms = rooms_with_the_agent(platform, ROOMS)
        policy = Policy(join_window=QUEUE // 2)
        with trio.fail_after(60):
            async with running_agent(platform, Recorder(), policy=policy) as running:
                joined = {room for room, view in running.agent.rooms.items() if view.joined}
                assert joined == set(rooms)
                assert running.agent.connects == 1
        stats = platform.stats
        # the platform never had to stop reading the agent: the window kept the replies
        # it held below its queue (without it: 600 joins at once, the queue full)
        assert stats["socket_backpressure"] == 0
        assert stats["sockets_stalled"] == stats["sockets_overflowed"] == 0
        assert stats["joins_refused"] == 0


@pytest.mark.parametrize("bad", [0, -1])
def test_the_window_is_a_policy_value(bad: int) -> None:
    assert Policy().join_window == 2048
    with pytest.raises(ValueError, match="join_window"):
        Policy(join_window=bad)
