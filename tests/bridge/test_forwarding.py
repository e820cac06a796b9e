"""Forwarding over real sockets: the embedded platform, the bridge, a real HTTP target.

Same-room forwards are serialised and different rooms overlap; a message is
remembered as forwarded only once the target took it, so a failed forward is
forwarded again when the message comes back, and a delivered one is not.
"""

from __future__ import annotations

import trio

from band_trio.platform import Platform
from band_trio.testing import open_recording_target

from ._helpers import identity, running_bridge
from .conftest import seeded


async def test_a_message_is_forwarded_as_an_envelope(platform: Platform) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with open_recording_target() as target, running_bridge([identity(platform, target.url)]):
        message_id = platform.post_message(room_id, user_id, "hello")
        with trio.fail_after(5):
            await target.wait_until(lambda: message_id in target.message_ids())
    envelope = next(r.envelope for r in target.received if r.envelope.message_id == message_id)
    assert envelope.event_type == "message_created"
    assert envelope.agent_id == agent_id and envelope.room_id == room_id
    assert envelope.payload["content"] == "hello" and envelope.forwarded_at.endswith("Z")


async def test_room_and_participant_events_are_forwarded(platform: Platform) -> None:
    agent_id, _, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        room_id = platform.create_room("new", [user_id, agent_id]).id or ""
        rooms = run.bridge.identities[agent_id].rooms
        assert rooms is not None
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: getattr(rooms.get(room_id), "joined_now", False))
            bob = platform.create_user(name="Bob").id
            platform.add_participant(room_id, bob)
            await target.wait_until(
                lambda: (
                    [
                        r.envelope.event_type
                        for r in target.received
                        if r.envelope.room_id == room_id
                    ]
                    == ["room_added", "participant_added"]
                )
            )
            platform.remove_participant(room_id, agent_id)
            await target.wait_until(
                lambda: any(r.envelope.event_type == "room_removed" for r in target.received)
            )


async def test_same_room_forwards_wait_their_turn_other_rooms_overlap(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    other = platform.create_room("other", [user_id, agent_id]).id or ""
    async with open_recording_target() as target, running_bridge([identity(platform, target.url)]):
        target.hold = True
        first = platform.post_message(room_id, user_id, "one")
        second = platform.post_message(room_id, user_id, "two")
        elsewhere = platform.post_message(other, user_id, "three")
        with trio.fail_after(5):
            await target.wait_until(lambda: {first, elsewhere} <= set(target.message_ids()))
            await trio.testing.wait_all_tasks_blocked(0.05)
            assert second not in target.message_ids()  # behind `first`, in its room
            target.release_all()
            await target.wait_until(lambda: second in target.message_ids())
    ids = target.message_ids()
    assert ids.index(first) < ids.index(second)


async def test_a_backlog_is_rehydrated_once_and_not_again_after_a_reconnect(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    waiting = platform.post_message(room_id, user_id, "sent before the bridge started")
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        with trio.fail_after(5):
            await target.wait_until(lambda: waiting in target.message_ids())
            before = run.bridge.identities[agent_id].link_connects
            assert platform.faults.drop_socket(agent_id)
            await run.bridge.wait_until(
                lambda: run.bridge.identities[agent_id].link_connects > before
            )
            await run.bridge.wait_until(lambda: run.bridge.identities[agent_id].rooms_idle)
    assert target.message_ids().count(waiting) == 1


async def test_a_failed_forward_is_forwarded_again_on_redelivery(platform: Platform) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        target.fail(500)
        message_id = platform.post_message(room_id, user_id, "the target fails this once")
        identity_run = run.bridge.identities[agent_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: identity_run.counters.failed == 1)
            assert platform.faults.drop_socket(agent_id)  # the reconnect rehydrates
            await run.bridge.wait_until(lambda: identity_run.counters.delivered == 1)
        assert [r.status for r in target.received] == [500, 200]
        assert identity_run.counters.failed == 1 and identity_run.counters.delivered == 1
    assert target.message_ids() == [message_id, message_id]


async def test_a_target_pointing_at_the_admin_api_is_not_counted_delivered(
    platform: Platform,
) -> None:
    """The admin API refuses an envelope's unknown fields (422), so a bridge whose target
    is `/_admin/users` by mistake counts the forward failed and creates nothing."""
    agent_id, room_id, user_id = seeded(platform)
    users = len(platform.store.users)
    target = identity(platform, f"{platform.info.admin_url}/users")
    async with running_bridge([target]) as run:
        platform.post_message(room_id, user_id, "to the wrong place")
        counters = run.bridge.identities[agent_id].counters
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: counters.failed >= 1)
        assert counters.delivered == 0
    assert len(platform.store.users) == users


async def test_an_event_queued_when_the_socket_drops_is_still_forwarded(
    platform: Platform,
) -> None:
    """A reconnect drops the room's queued messages for a `/next` catch-up (which brings
    them back, in order); a room or participant event has no `/next` to come back
    from, so it stays queued (it is forwarded after that catch-up)."""
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        rooms = ident.rooms
        assert rooms is not None
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = True
            held = platform.post_message(room_id, user_id, "held")
            await target.wait_until(lambda: held in target.message_ids())
            bob = platform.create_user(name="Bob").id
            platform.add_participant(room_id, bob)
            await run.bridge.wait_until(lambda: rooms.current[room_id].queued == 1)
            before = ident.link_connects
            assert platform.faults.drop_socket(agent_id)
            await run.bridge.wait_until(lambda: ident.link_connects > before)
            target.release_all()
            await target.wait_until(
                lambda: any(r.envelope.event_type == "participant_added" for r in target.received)
            )
            await run.bridge.wait_until(lambda: ident.rooms_idle)
    kinds = [r.envelope.event_type for r in target.received if r.envelope.room_id == room_id]
    assert kinds.count("participant_added") == 1


async def test_an_event_while_the_room_is_stopped_is_forwarded_after_play(
    platform: Platform,
) -> None:
    """A stop takes no new work, and its messages come back through `/next` on play;
    a room or participant event would not come back: it waits for the play."""
    agent_id, room_id, _ = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        rooms = ident.rooms
        assert rooms is not None
        room = rooms.current[room_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            platform.send_control(agent_id, "stop", room_id=room_id)
            await run.bridge.wait_until(lambda: room.stopped)
            bob = platform.create_user(name="Bob").id
            platform.add_participant(room_id, bob)
            await run.bridge.wait_until(lambda: room.queued == 1)
            assert not target.received  # nothing while stopped
            platform.send_control(agent_id, "play", room_id=room_id)
            await target.wait_until(lambda: len(target.received) == 1)
            await run.bridge.wait_until(lambda: ident.rooms_idle)
    assert [r.envelope.event_type for r in target.received] == ["participant_added"]
