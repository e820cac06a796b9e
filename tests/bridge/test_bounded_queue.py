"""What a bridge room keeps is bounded (issue 21, item 9): its queue
(`BridgePolicy.room_queue`: past it the queued messages are dropped and a `/next`
catch-up forwards the same messages, in order — none lost, none forwarded twice;
before, a room kept one entry per push for as long as a forward was held), and what
its target keeps for it (dropped when the room is left)."""

from __future__ import annotations

import functools

import trio

from band_trio.bridge import A2ATargetConfig, BridgePolicy
from band_trio.platform import Platform
from band_trio.testing import open_recording_target
from peers import shared_a2a_peer
from support import all_processed, status

from ._helpers import identity, running_bridge
from .conftest import seeded

CAP = 5


def processed(platform: Platform, message_id: str) -> bool:
    return status(platform, message_id) == "processed"


async def test_a_flood_behind_a_held_forward_is_caught_up_through_next_in_order(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge(
            [identity(platform, target.url)], bridge_policy=BridgePolicy(room_queue=CAP)
        ) as run,
    ):
        ident = run.bridge.identities[agent]
        with trio.fail_after(20):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = True
            first = platform.post_message(room, user, "first")
            await target.wait_until(lambda: first in target.message_ids())
            flood = [platform.post_message(room, user, f"m{n}") for n in range(12)]
            # 5 queued; the 6th drops them for a catch-up; 4 more; the 10th drops again
            await run.bridge.wait_until(lambda: ident.counters.overflowed == 2)
            rooms = ident.rooms
            assert rooms is not None and rooms.current[room].queued <= CAP
            target.release_all()
            await platform.wait_until(all_processed(platform, [first, *flood]))
    assert target.message_ids() == [first, *flood]  # each once, in the room's order


async def test_a_left_room_drops_its_a2a_context_and_a_rejoined_room_starts_a_new_one(
    platform: Platform,
) -> None:
    """`A2ATarget.room_left` was never called: every room's A2A context was kept for
    good, and a room left and joined again went on in its old conversation."""
    agent, room, user = seeded(platform)
    async with shared_a2a_peer() as peer:
        config = A2ATargetConfig(url=peer.url, streaming=True)
        async with running_bridge([identity(platform, config)]) as run:
            ident = run.bridge.identities[agent]
            rooms = ident.rooms
            assert rooms is not None
            with trio.fail_after(20):
                for text in ("mode=quick one", "mode=quick two"):
                    message = platform.post_message(room, user, text)
                    await platform.wait_until(functools.partial(processed, platform, message))
                platform.remove_participant(room, agent)
                await run.bridge.wait_until(lambda: room not in rooms.current)
                await run.bridge.wait_until(lambda: rooms.hosted == ())  # closed: told
                platform.add_participant(room, agent)
                await run.bridge.wait_until(lambda: room in rooms.current)
                again = platform.post_message(room, user, "mode=quick three")
                await platform.wait_until(lambda: status(platform, again) == "processed")
        sent = [
            e["body"]["params"]["message"].get("contextId")
            for e in peer.events("request")
            if (e.get("body") or {}).get("method") == "SendStreamingMessage"
        ]
    contexts = [e["context_id"] for e in peer.events("execute_started")]
    assert sent == [None, contexts[0], None]  # the third: a new conversation
    assert contexts[2] != contexts[0]
