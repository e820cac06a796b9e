"""An agent's room joins at start-up cost no task per room (issue 44).

Each room's joins used to run in a task of their own that parked on each reply
under a deadline scope: 10,000 rooms, 10,000 more tasks at every connect, a fifth
of the agent's CPU to start. One task per connection now sends every join and the
socket's reader hands it each reply; what remains per room is the room's own task.
"""

from __future__ import annotations

import trio

from band_trio.platform import open_platform
from support import Recorder, rooms_with_the_agent, running_agent

ROOMS = 200
AGENT_TASKS = 40
"""The agent's own tasks, whatever its rooms: the link, the socket's reader and
heartbeat, the library's reader, the rooms host, the REST pool... (fewer than this)."""


async def test_joining_200_rooms_spawns_no_task_per_join() -> None:
    async with open_platform(seed=True) as platform:
        rooms = rooms_with_the_agent(platform, ROOMS)
        with trio.fail_after(60):
            async with running_agent(platform, Recorder()) as running:
                joined = {room for room, view in running.agent.rooms.items() if view.joined}
                assert joined == set(rooms)
                # a room's own task, and no more per room, plus the agent's own
                assert running.tasks.spawned < ROOMS + AGENT_TASKS, running.tasks.spawned
