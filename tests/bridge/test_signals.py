"""Signals over real sockets: interrupt cancels the forward in flight (the queued ones
follow, as an agent's turns do); stop cancels it and clears the room's queue; play
nudges `/next` once, as tracked work a stop cancels; an agent-scope signal reaches
every room, past the room list's first page.

Each test is one of band-bridge's defects or the rule it broke.
"""

from __future__ import annotations

import httpx2
import trio

from band_trio.platform import Platform
from band_trio.testing import open_recording_target

from ._helpers import identity, running_bridge
from .conftest import seeded


def _control_sent(platform: Platform, agent_id: str) -> bool:
    return any(
        e.kind == "ws_out" and e.agent_id == agent_id and "agent.control" in (e.frame or "")
        for e in platform.log()
    )


def _next_calls(platform: Platform, room_id: str, since: int = 0) -> int:
    return sum(
        1
        for e in platform.log(since)
        if e.kind == "rest" and e.path is not None and e.path.endswith(f"{room_id}/messages/next")
    )


async def test_an_interrupt_cancels_the_running_forward_and_the_queued_ones_follow(
    platform: Platform,
) -> None:
    """The runtime's rule: an interrupt drops the message it cut off, not the ones
    behind it (before, the bridge cleared its queue too, and those waited for a play
    or a rejoin)."""
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        assert ident.rooms is not None
        room = ident.rooms.current[room_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)  # rehydration done
            target.hold = True
            running = platform.post_message(room_id, user_id, "running")
            queued = [platform.post_message(room_id, user_id, f"queued {i}") for i in range(3)]
            await target.wait_until(lambda: running in target.message_ids())
            await run.bridge.wait_until(lambda: room.queued == 3)
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            await target.received[0].closed.wait()  # the running forward's request closed
            target.release_all()  # a queued forward that started meanwhile goes on
            after = platform.post_message(room_id, user_id, "after the interrupt")
            await target.wait_until(lambda: after in target.message_ids())
            await run.bridge.wait_until(lambda: room.idle)
        assert ident.counters.cancelled == 1 and ident.counters.dropped == 0
    assert target.message_ids() == [running, *queued, after]


async def test_a_stop_cancels_and_clears_then_play_replays_through_next(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        assert ident.rooms is not None
        room = ident.rooms.current[room_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = True
            stopped = platform.post_message(room_id, user_id, "stopped mid-forward")
            behind = platform.post_message(room_id, user_id, "queued behind it")
            await target.wait_until(lambda: stopped in target.message_ids())
            await run.bridge.wait_until(lambda: room.queued == 1)
            platform.send_control(agent_id, "stop", room_id=room_id)
            await target.received[0].closed.wait()
            await run.bridge.wait_until(lambda: room.idle and room.stopped)
            target.hold = False
            platform.send_control(agent_id, "play", room_id=room_id)
            # the catch-up forwards the oldest unprocessed message, the one stop cut off,
            # then what stop cleared from the queue (`/next` again, once it is processed)
            await target.wait_until(lambda: len(target.received) == 3)
            await run.bridge.wait_until(lambda: room.idle)
    assert target.message_ids() == [stopped, stopped, behind]


async def test_an_interrupt_during_start_up_rehydration_does_not_end_the_bridge(
    platform: Platform,
) -> None:
    """band-bridge: the start-up rehydration was a gather of children, and an interrupt
    that cancelled one ended the whole bridge. Here an interrupt with no forward
    running cuts nothing (the runtime's rule): the catch-up goes on."""
    agent_id, room_id, user_id = seeded(platform)
    waiting = platform.post_message(room_id, user_id, "waiting when the bridge starts")
    hold = platform.faults.hold_rest("next", room_id=room_id)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)], wait=False) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(5):
            await hold.arrived.wait()  # the rehydration's `/next` is in flight
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            await platform.wait_until(lambda: _control_sent(platform, agent_id))
            hold.release()
            later = platform.post_message(room_id, user_id, "after the interrupt")
            await target.wait_until(lambda: later in target.message_ids())
        assert not run.finished.is_set() and ident.ended is None
    assert target.message_ids()[-1] == later
    assert target.message_ids().count(waiting) <= 1


async def test_a_play_nudge_still_in_its_next_call_is_cancelled_by_a_following_stop(
    platform: Platform,
) -> None:
    """band-bridge: a play's `/next` nudge in flight was not cancelled by a stop, so a
    stopped room was fed the message it had just been stopped on."""
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        assert ident.rooms is not None
        room = ident.rooms.current[room_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            platform.send_control(agent_id, "stop", room_id=room_id)
            await run.bridge.wait_until(lambda: room.stopped)
            platform.post_message(room_id, user_id, "arrived while stopped")
            hold = platform.faults.hold_rest("next", room_id=room_id)
            platform.send_control(agent_id, "play", room_id=room_id)
            await hold.arrived.wait()  # the nudge is in its `/next` call
            platform.send_control(agent_id, "stop", room_id=room_id)
            await run.bridge.wait_until(lambda: room.stopped and room.idle)
            hold.release()  # the platform would now answer the message...
            await trio.testing.wait_all_tasks_blocked(0.05)
        assert room.stopped and room.idle
    assert target.received == []  # ...but nobody is left waiting for it


async def test_plays_in_a_row_send_one_next_nudge(platform: Platform) -> None:
    agent_id, room_id, _ = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            platform.send_control(agent_id, "stop", room_id=room_id)
            hold = platform.faults.hold_rest("next", room_id=room_id)
            mark = len(platform.log())
            for _ in range(3):
                platform.send_control(agent_id, "play", room_id=room_id)
            await hold.arrived.wait()
            await run.bridge.wait_until(lambda: ident.counters.passes == 2)  # start-up + one
            hold.release()
            await run.bridge.wait_until(lambda: ident.rooms_idle)
        assert _next_calls(platform, room_id, mark) == 1


async def test_an_agent_scope_interrupt_reaches_every_room_past_the_first_page(
    platform: Platform,
) -> None:
    """band-bridge: an agent-scope signal fanned out over the first page of rooms only
    (and listed them with a REST call on the receive path)."""
    agent_id, seeded_room, user_id = seeded(platform)
    rooms = [seeded_room] + [
        platform.create_room(f"r{i}", [user_id, agent_id]).id or "" for i in range(129)
    ]
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        assert ident.rooms is not None and len(ident.rooms.current) == 130
        listed = [e for e in platform.log() if e.path == "/api/v1/agent/chats"]
        assert len(listed) == 2  # the bridge read both pages
        with trio.fail_after(10):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = True
            posted = [platform.post_message(r, user_id, "hello") for r in rooms]
            await target.wait_until(lambda: len(target.received) == 32)  # the forward cap
            await run.bridge.wait_until(lambda: ident.counters.in_flight == 32)
            mark = len(platform.log())
            platform.send_control(agent_id, "interrupt")  # no room: scope agent
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            for received in target.received:
                await received.closed.wait()
        assert ident.counters.cancelled == 130  # running or waiting for the cap: all
        assert not any(e.path and "/chats?" in e.path for e in platform.log(mark))
    assert len(target.received) == 32 and set(target.message_ids()) <= set(posted)


async def test_the_platform_pages_the_room_list_as_documented(platform: Platform) -> None:
    """`GET /api/v1/agent/chats?page=P&page_size=100`: pages of 100 and the metadata
    the client pages by (docs/reference/platform.md, `GET /chats`)."""
    agent_id, _, user_id = seeded(platform)
    for i in range(129):
        platform.create_room(f"r{i}", [user_id, agent_id])
    info = platform.info
    headers = {"x-api-key": info.api_key or ""}
    async with httpx2.AsyncClient(base_url=info.rest_url, headers=headers) as client:
        with trio.fail_after(5):
            pages = [
                (
                    await client.get("/api/v1/agent/chats", params={"page": n, "page_size": 100})
                ).json()
                for n in (1, 2)
            ]
    assert [len(page["data"]) for page in pages] == [100, 30]
    assert pages[1]["metadata"] == {
        "page": 2,
        "page_size": 100,
        "total_count": 130,
        "total_pages": 2,
    }
    ids = [room["id"] for page in pages for room in page["data"]]
    assert len(set(ids)) == 130
