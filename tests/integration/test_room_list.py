"""The room list is read page by page, past band-sdk's 50 pages, up to `Policy.max_rooms`."""

from __future__ import annotations

import logging

import pytest
import trio

from band_trio import Policy, errors
from band_trio.link import RestClient
from band_trio.platform import Platform
from support import Recorder, agent_for


def _rooms(platform: Platform, count: int) -> None:
    info = platform.info
    assert info.agent_id and info.user_id
    for i in range(count):
        platform.create_room(f"r{i}", [info.agent_id, info.user_id])


async def test_every_page_is_read(platform: Platform) -> None:
    _rooms(platform, 249)  # with the seeded room: 250, three pages of 100
    info = platform.info
    assert info.api_key
    async with RestClient(info.rest_url, info.api_key) as rest:
        with trio.fail_after(10):
            rooms = await rest.rooms()
    assert len({r.id for r in rooms}) == 250


async def test_past_max_rooms_the_rest_is_left_out_and_said(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    _rooms(platform, 249)
    info = platform.info
    assert info.api_key
    policy = Policy(max_rooms=150)
    with caplog.at_level(logging.WARNING, logger="band_trio.link.rest"):
        async with RestClient(info.rest_url, info.api_key, policy=policy) as rest:
            with trio.fail_after(10):
                rooms = await rest.rooms()
    assert len(rooms) == 150
    assert "more than 150 rooms" in caplog.text and "250 in all" in caplog.text


def _pages_entered(platform: Platform, position: int) -> list[float]:
    return [
        e.t
        for e in platform.log(position)
        if e.kind == "rest" and (e.path or "").endswith("/chats")
    ]


async def test_after_the_first_page_the_others_are_in_flight_at_once(platform: Platform) -> None:
    _rooms(platform, 449)  # with the seeded room: 450, five pages of 100
    info = platform.info
    assert info.api_key
    async with RestClient(info.rest_url, info.api_key) as rest:
        position = platform.request_log.next_seq
        hold = 1.0
        platform.faults.delay_rest("chats", 0.0)  # the first page as it comes
        platform.faults.delay_rest("chats", hold, count=4)  # each later page held a while
        with trio.fail_after(10):
            rooms = await rest.rooms()
    assert len({r.id for r in rooms}) == 450
    _first, *others = _pages_entered(platform, position)
    assert len(others) == 4
    # every later page reached the platform before the first of them was answered
    assert max(others) - min(others) < hold


async def test_a_failing_page_fails_the_list_and_ends_the_others(platform: Platform) -> None:
    _rooms(platform, 449)
    info = platform.info
    assert info.api_key
    policy = Policy(rest_max_retries=0)
    async with RestClient(info.rest_url, info.api_key, policy=policy) as rest:
        platform.faults.delay_rest("chats", 0.0)
        platform.faults.fail_rest("chats", 500, count=1)
        with trio.fail_after(10), pytest.raises(errors.PlatformError):
            await rest.rooms()


async def test_an_agent_joins_each_page_of_rooms_as_it_comes(platform: Platform) -> None:
    """At start-up the rooms of the first page are joined while the later pages are
    still on their way (issue 44): a platform that pages by offset answers its last
    page of 100 long after the first, and before, no room was joined until then."""
    _rooms(platform, 249)  # with the seeded room: 250, three pages of 100
    platform.faults.delay_rest("chats", 0.0)  # the first page as it comes
    held = platform.faults.hold_rest("chats", count=2)  # the others held
    agent = agent_for(platform, Recorder())
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            started = trio.Event()

            async def run() -> None:
                await nursery.start(agent.run)
                started.set()

            nursery.start_soon(run)
            joined = lambda: sum(1 for view in agent.rooms.values() if view.joined)  # noqa: E731
            await agent.wait_until(lambda: joined() >= 100)
            assert not held.released and not started.is_set()
            held.release()
            await started.wait()
            assert joined() == 250
            await agent.stop()
