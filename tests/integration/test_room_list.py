"""The room list is read page by page, past band-sdk's 50 pages, up to `Policy.max_rooms`."""

from __future__ import annotations

import logging

import pytest
import trio

from band_trio import Policy
from band_trio.link import RestClient
from band_trio.platform import Platform


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
