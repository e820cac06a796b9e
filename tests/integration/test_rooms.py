"""Joining and leaving rooms at run time: room_added, room_removed, room_deleted."""

from __future__ import annotations

import trio

from band_trio import Turn
from band_trio.platform import Platform
from support import Recorder, running_agent, status

DEADLINE = 10


def topics_joined(platform: Platform, room_id: str) -> set[str]:
    """Room topics the agent has joined minus those it left, from the platform's log: a
    `phx_leave` leaves one topic, the close of the agent's socket every topic at once."""
    joined: set[str] = set()
    for entry in platform.log():
        if entry.kind == "ws_close" and entry.agent_id == platform.info.agent_id:
            joined.clear()
            continue
        if entry.kind != "ws_in" or not entry.frame or room_id not in entry.frame:
            continue
        topic = next(
            t for t in (f"chat_room:{room_id}", f"room_participants:{room_id}") if t in entry.frame
        )
        if '"phx_join"' in entry.frame:
            joined.add(topic)
        elif '"phx_leave"' in entry.frame:
            joined.discard(topic)
    return joined


async def test_a_room_added_at_run_time_is_joined_and_served(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            room = platform.create_room(title="later", participants=[info.user_id])
            platform.post_message(room.id, info.user_id, "before the agent came: not for it")
            platform.add_participant(room.id, info.agent_id)
            await running.agent.wait_until(lambda: room.id in running.agent.rooms)
            live = platform.post_message(room.id, info.user_id, "live")
            await platform.wait_until(lambda: status(platform, live) == "processed")
    assert topics_joined(platform, room.id) == set()  # left again on stop: the socket's close
    assert adapter.calls == ["live"]


async def forever(turn: Turn) -> None:
    await trio.sleep_forever()


async def test_room_removed_leaves_the_room_and_cancels_its_turn(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.user_id and info.room_id
    adapter = Recorder(forever)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            message = platform.post_message(info.room_id, info.user_id, "long")
            await adapter.wait_for(lambda: adapter.calls == ["long"])
            platform.remove_participant(info.room_id, info.agent_id)
            await adapter.wait_for(lambda: adapter.left == [info.room_id])
            assert info.room_id not in running.agent.rooms
            assert adapter.cancelled == ["long"]
            await platform.wait_until(lambda: topics_joined(platform, info.room_id) == set())
            # the room's task and everything under it is gone
            assert not any(info.room_id in task.name for task in running.tasks.living)
    assert status(platform, message) == "processing"  # leaving is not an interrupt


async def test_room_deleted_leaves_the_room(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            room = platform.create_room(title="doomed", participants=[info.user_id, info.agent_id])
            await platform.wait_until(lambda: len(topics_joined(platform, room.id)) == 2)
            platform.delete_room(room.id)
            await adapter.wait_for(lambda: room.id in adapter.left)
            assert room.id not in running.agent.rooms
            # the other room still works
            assert info.room_id
            message = platform.post_message(info.room_id, info.user_id, "still here?")
            await platform.wait_until(lambda: status(platform, message) == "processed")


async def test_rooms_run_concurrently(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.user_id and info.room_id
    both_running = trio.Event()
    running_now: set[str] = set()

    async def wait_for_the_other(turn: Turn) -> None:
        running_now.add(turn.room_id)
        if len(running_now) == 2:
            both_running.set()
        await both_running.wait()  # deadlocks unless the two rooms' turns overlap
        await turn.reply("together")

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(wait_for_the_other)):
            other = platform.create_room(title="other", participants=[info.user_id, info.agent_id])
            await platform.wait_until(lambda: len(topics_joined(platform, other.id)) == 2)
            first = platform.post_message(info.room_id, info.user_id, "one")
            second = platform.post_message(other.id, info.user_id, "two")
            await platform.wait_until(
                lambda: status(platform, first) == status(platform, second) == "processed"
            )


async def test_a_room_whose_join_is_refused_is_given_up(
    platform: Platform, autojump_clock: object
) -> None:
    info = platform.info
    assert info.agent_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(120):
        async with running_agent(platform, adapter):
            room = platform.create_room(title="gone soon", participants=[info.user_id])
            platform.add_participant(room.id, info.agent_id)
            platform.delete_room(room.id)  # before the agent could join it
            await adapter.wait_for(lambda: room.id in adapter.left)


async def test_a_room_left_and_added_again_on_the_same_connection_is_joined_again(
    platform: Platform,
) -> None:
    """Its topics were left with it; the connection remembered the room id as joined and
    never joined the new room's topics (its pushes lost until a reconcile, a minute on)."""
    info = platform.info
    assert info.agent_id and info.user_id and info.room_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            agent = running.agent
            platform.remove_participant(info.room_id, info.agent_id)
            await adapter.wait_for(lambda: adapter.left == [info.room_id])
            await platform.wait_until(lambda: topics_joined(platform, info.room_id) == set())
            platform.add_participant(info.room_id, info.agent_id)
            await agent.wait_until(
                lambda: info.room_id in agent.rooms and agent.rooms[info.room_id].joined
            )
            assert len(topics_joined(platform, info.room_id)) == 2
            again = platform.post_message(info.room_id, info.user_id, "back again")
            await platform.wait_until(lambda: status(platform, again) == "processed")
    assert adapter.calls == ["back again"]
