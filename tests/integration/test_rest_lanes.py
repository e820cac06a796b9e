"""The REST client's lanes: marks go before every other waiting request, and the pool
is never handed more requests than it has connections (docs/benchmarks.md, the scale
rows: a mass abort's marks used to queue behind `/next` passes and activity reports,
and httpcore2 scans every queued request on each change of its pool), and a mark's
grace counts from the moment it has a connection, not from its place in the queue
(a wave longer than `cleanup_grace` used to cut the marks still queued, each left
ack-pending and retried a grace later)."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing

from band_trio import Policy, Turn
from band_trio.link import RestClient
from band_trio.platform import Platform
from support import (
    Recorder,
    all_processed,
    background_agent,
    rooms_with_the_agent,
    running_agent,
)

DEADLINE = 10


def rest_paths(platform: Platform, position: int) -> list[str]:
    return [e.path or "" for e in platform.log(position) if e.kind == "rest"]


def kinds_of(paths: list[str]) -> list[str]:
    """Each request's route: "mark" for a `/processed`, else its last path segment."""
    return ["mark" if p.endswith("/processed") else p.rsplit("/", 1)[-1] for p in paths]


async def test_waiting_marks_go_before_every_other_waiting_request(platform: Platform) -> None:
    info = platform.info
    assert info.rest_url and info.api_key and info.room_id and info.user_id
    policy = Policy(rest_connections=1)
    with trio.fail_after(DEADLINE):
        async with RestClient(info.rest_url, info.api_key, policy=policy) as rest:
            messages = [
                platform.post_message(info.room_id, info.user_id, f"m{i}") for i in range(4)
            ]
            for message in messages:
                assert await rest.claim(info.room_id, message) is not None
            position = platform.request_log.next_seq
            platform.faults.delay_rest("activity", 0.2)  # holds the one connection a while
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rest.report_activity, info.room_id, True)
                await trio.testing.wait_all_tasks_blocked()
                for _ in range(3):  # other work queues first ...
                    nursery.start_soon(rest.next_message, info.room_id)
                await trio.testing.wait_all_tasks_blocked()
                for message in messages:  # ... then a mass abort's marks
                    nursery.start_soon(rest.mark_processed, info.room_id, message)
    kinds = kinds_of(rest_paths(platform, position))
    assert kinds == ["activity", "mark", "mark", "mark", "mark", "next", "next", "next"]


# -- a mass abort: every mark out in one wave (a mark's grace starts at its connection)

ROOMS = 6
DELAY = 0.2
"""The platform's time for one mark; ROOMS marks over one connection take 1.2 s."""


def marks_of(platform: Platform, position: int) -> list[str]:
    return [p for p in rest_paths(platform, position) if p.endswith("/processed")]


async def forever(turn: Turn) -> None:
    await trio.sleep_forever()


async def busy_rooms(platform: Platform, adapter: Recorder) -> list[str]:
    """A turn running (until cancelled) in each of ROOMS rooms; their messages."""
    info = platform.info
    assert info.user_id
    rooms = rooms_with_the_agent(platform, ROOMS)
    posted = [platform.post_message(room, info.user_id, f"in {room}") for room in rooms]
    await adapter.wait_for(lambda: len(adapter.calls) == ROOMS)
    return posted


async def test_a_mass_abort_marks_every_room_in_one_wave_past_the_cleanup_grace(
    platform: Platform, autojump_clock: object, caplog: pytest.LogCaptureFixture
) -> None:
    """The wave takes longer than `cleanup_grace`, each mark less: no mark is cut off
    while it waits for the one connection, so none is left ack-pending and retried."""
    info = platform.info
    assert info.agent_id
    policy = Policy(rest_connections=1, cleanup_grace=2 * DELAY + 0.1)
    assert policy.cleanup_grace < ROOMS * DELAY  # the wave outlasts one grace
    adapter = Recorder(forever)
    caplog.set_level(logging.INFO, "band_trio.runtime.settle")
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            posted = await busy_rooms(platform, adapter)
            position = platform.request_log.next_seq
            platform.faults.delay_rest("processed", DELAY, count=ROOMS)
            signalled = trio.current_time()
            platform.send_control(info.agent_id, "interrupt")  # every room of the agent
            await platform.wait_until(all_processed(platform, posted))
            wave = trio.current_time() - signalled
    assert wave <= ROOMS * DELAY + 0.2
    kinds = kinds_of(rest_paths(platform, position))
    first, last = kinds.index("mark"), len(kinds) - kinds[::-1].index("mark")
    assert kinds[first:last] == ["mark"] * ROOMS  # one wave: each mark once, no pass between
    assert len(set(marks_of(platform, position))) == ROOMS
    assert kinds[last:].count("activity") == ROOMS  # then every room's `working: false`
    assert not [r for r in caplog.records if "overran" in r.getMessage()]  # nothing cut off
    assert running.stop_result is not None and running.stop_result.unsettled == ()


async def test_the_hard_stop_cuts_a_mark_waiting_for_a_connection(
    platform: Platform, autojump_clock: object
) -> None:
    """One connection, the first mark held: the hard stop (a second signal) still ends
    the run within `hard_stop_grace`, though a waiting mark's grace (5 s) only starts
    once it has the connection: the one that gets it after the stop is cut all the
    same (the rest are cut while they wait)."""
    info = platform.info
    assert info.agent_id
    policy = Policy(rest_connections=1, cleanup_grace=5, hard_stop_grace=0.2)
    adapter = Recorder(forever)
    async with background_agent(platform, adapter, policy=policy) as bg:
        await bg.started.wait()
        with trio.fail_after(DEADLINE):
            await busy_rooms(platform, adapter)
            first = platform.faults.hold_rest("processed")
            platform.send_control(info.agent_id, "interrupt")
            await first.arrived.wait()  # one mark held, the others wait for its connection
            others = platform.faults.hold_rest("processed", count=ROOMS)
            await trio.testing.wait_all_tasks_blocked()
            stopped = trio.current_time()
            bg.agent.hard_stop("test")
            first.release()  # the next mark gets the connection after the stop ...
            await others.arrived.wait()  # ... and is held in its turn
            await bg.finished.wait()
        assert trio.current_time() - stopped <= policy.hard_stop_grace + 0.1
        assert bg.error is None
        assert others.held == 1  # the rest were cut while they waited
        others.release()
