"""The REST client's lanes: marks go before every other waiting request, and the pool
is never handed more requests than it has connections (docs/benchmarks.md, the scale
rows: a mass abort's marks used to queue behind `/next` passes and activity reports,
and httpcore2 scans every queued request on each change of its pool)."""

from __future__ import annotations

import trio
import trio.testing

from band_trio import Policy
from band_trio.link import RestClient
from band_trio.platform import Platform

DEADLINE = 10


def rest_paths(platform: Platform, position: int) -> list[str]:
    return [e.path or "" for e in platform.log(position) if e.kind == "rest"]


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
    paths = rest_paths(platform, position)
    kinds = ["mark" if p.endswith("/processed") else p.rsplit("/", 1)[-1] for p in paths]
    assert kinds == ["activity", "mark", "mark", "mark", "mark", "next", "next", "next"]
