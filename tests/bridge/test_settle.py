"""The bridge settles what a plain target takes: it claims a message before the
forward, marks it `processed` once the target took it, leaves it `processing` on a
stop and consumes it on an interrupt; a failed send is sent again within its
forward after a backoff, and the message given up (`failed`) after the policy's
attempts.

Without the settle, `GET /next` kept returning the oldest forwarded message, and
every catch-up stopped at it: the messages behind it were never caught up.
"""

from __future__ import annotations

import trio

from band_trio.bridge import BridgePolicy
from band_trio.platform import Platform
from band_trio.testing import RecordingTarget, open_recording_target

from ._helpers import identity, running_bridge
from .conftest import seeded


def _status(platform: Platform, message_id: str) -> str | None:
    agent_id = platform.info.agent_id
    assert agent_id
    entry = platform.delivery(message_id).get(agent_id)
    return None if entry is None else str(entry["status"])


def _messages(target: RecordingTarget) -> list[str]:
    return [m for m in target.message_ids() if m is not None]


def _statuses(target: RecordingTarget, message_id: str) -> list[int | None]:
    return [r.status for r in target.received if r.envelope.message_id == message_id]


async def test_a_plain_target_s_messages_are_processed_and_a_restart_forwards_none_again(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with open_recording_target() as target:
        async with running_bridge([identity(platform, target.url)]) as run:
            ids = [platform.post_message(room_id, user_id, f"one of three: {i}") for i in range(3)]
            with trio.fail_after(5):
                await platform.wait_until(
                    lambda: all(_status(platform, m) == "processed" for m in ids)
                )
                await run.bridge.wait_until(lambda: run.bridge.identities[agent_id].rooms_idle)
        assert _messages(target) == ids
        # no bridge runs now: these two wait for the next one's start-up catch-up
        later = [platform.post_message(room_id, user_id, f"while away: {i}") for i in range(2)]
        async with running_bridge([identity(platform, target.url)]) as run:
            with trio.fail_after(5):
                await platform.wait_until(
                    lambda: all(_status(platform, m) == "processed" for m in later)
                )
                await run.bridge.wait_until(lambda: run.bridge.identities[agent_id].rooms_idle)
    assert _messages(target) == ids + later  # none forwarded twice, in order


async def test_a_failed_forward_is_retried_by_the_backoff_without_a_reconnect(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    policy = BridgePolicy(retry_first=0.05)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)], bridge_policy=policy) as run,
    ):
        ident = run.bridge.identities[agent_id]
        target.fail(500, 2)
        message_id = platform.post_message(room_id, user_id, "taken on the third try")
        with trio.fail_after(5):
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
            await run.bridge.wait_until(lambda: ident.rooms_idle)
        assert ident.link_connects == 1  # no reconnect: the backoff alone retried it
    assert _statuses(target, message_id) == [500, 500, 200]
    assert ident.counters.failed == 2 and ident.counters.delivered == 1


async def test_a_message_is_marked_failed_after_the_forward_attempts_and_the_room_moves_on(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    policy = BridgePolicy(retry_first=0.01, forward_attempts=3)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)], bridge_policy=policy) as run,
    ):
        ident = run.bridge.identities[agent_id]
        rooms = ident.rooms
        assert rooms is not None
        target.fail(500, 3)
        given_up = platform.post_message(room_id, user_id, "the target never takes this")
        with trio.fail_after(5):
            await platform.wait_until(lambda: _status(platform, given_up) == "failed")
            nxt = platform.post_message(room_id, user_id, "the next one")
            await platform.wait_until(lambda: _status(platform, nxt) == "processed")
            # a catch-up gets past the failed head (`/next` still returns it)
            platform.send_control(agent_id, "stop", room_id=room_id)
            await run.bridge.wait_until(lambda: rooms.current[room_id].stopped)
            behind = platform.post_message(room_id, user_id, "sent while stopped")
            platform.send_control(agent_id, "play", room_id=room_id)
            await platform.wait_until(lambda: _status(platform, behind) == "processed")
            await run.bridge.wait_until(lambda: ident.rooms_idle)
    assert _messages(target) == [given_up] * 3 + [nxt, behind]
    assert _status(platform, given_up) == "failed"
    # the room is told, as the runtime tells it of a failed turn
    errors = [e for e in platform.store.events(room_id) if e["message_type"] == "error"]
    assert [e["sender_id"] for e in errors] == [agent_id]
    assert "did not take it" in errors[0]["content"]


async def test_a_restarted_bridge_forwards_no_message_it_gave_up_and_tells_the_room_once(
    platform: Platform,
) -> None:
    """The platform's `failed` is the budget spent: a new bridge process walks past it
    (no forward, no second error event) and forwards what is behind it."""
    agent_id, room_id, user_id = seeded(platform)
    policy = BridgePolicy(retry_first=0.01, forward_attempts=2)
    async with open_recording_target() as target:
        async with running_bridge([identity(platform, target.url)], bridge_policy=policy):
            target.fail(500, 2)
            given_up = platform.post_message(room_id, user_id, "the target never takes this")
            with trio.fail_after(5):
                await platform.wait_until(lambda: _status(platform, given_up) == "failed")
        assert _messages(target) == [given_up] * 2
        later = platform.post_message(room_id, user_id, "while away")
        async with running_bridge([identity(platform, target.url)], bridge_policy=policy) as run:
            with trio.fail_after(5):
                await platform.wait_until(lambda: _status(platform, later) == "processed")
                await run.bridge.wait_until(lambda: run.bridge.identities[agent_id].rooms_idle)
    assert _messages(target) == [given_up] * 2 + [later]
    errors = [e for e in platform.store.events(room_id) if e["message_type"] == "error"]
    assert len(errors) == 1


async def test_a_stop_mid_forward_leaves_the_message_processing_and_play_replays_it_once(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        target.hold = True
        message_id = platform.post_message(room_id, user_id, "stopped mid-forward")
        with trio.fail_after(5):
            await target.wait_until(lambda: message_id in target.message_ids())
            assert _status(platform, message_id) == "processing"  # claimed before the forward
            platform.send_control(agent_id, "stop", room_id=room_id)
            await target.received[-1].closed.wait()
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            assert _status(platform, message_id) == "processing"  # left for play
            assert _messages(target) == [message_id]
            target.hold = False
            platform.send_control(agent_id, "play", room_id=room_id)
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
            await run.bridge.wait_until(lambda: ident.rooms_idle)
    assert _messages(target) == [message_id, message_id]


async def test_an_interrupt_mid_forward_consumes_the_message_of_a_plain_target(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        target.hold = True
        message_id = platform.post_message(room_id, user_id, "interrupted mid-forward")
        with trio.fail_after(5):
            await target.wait_until(lambda: message_id in target.message_ids())
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = False
            before = ident.link_connects
            assert platform.faults.drop_socket(agent_id)  # the rejoin's catch-up
            await run.bridge.wait_until(lambda: ident.link_connects > before and ident.rooms_idle)
    assert _messages(target) == [message_id]  # not forwarded again


async def test_a_stop_ends_a_forward_in_its_backoff_and_play_replays_it(
    platform: Platform,
) -> None:
    """The backoff between two sends of one forward is part of its turn: a stop ends
    it at once, leaves the message `processing`, and play forwards it again."""
    agent_id, room_id, user_id = seeded(platform)
    policy = BridgePolicy(retry_first=60)  # never due within the test
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)], bridge_policy=policy) as run,
    ):
        ident = run.bridge.identities[agent_id]
        rooms = ident.rooms
        assert rooms is not None
        target.fail(500)
        message_id = platform.post_message(room_id, user_id, "fails, then the room stops")
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.counters.failed == 1)
            room = rooms.get(room_id)
            assert room is not None and not room.idle  # in its backoff
            platform.send_control(agent_id, "stop", room_id=room_id)
            await run.bridge.wait_until(lambda: room.stopped and room.idle)
            assert ident.counters.cancelled == 1
            assert _status(platform, message_id) == "processing"
            platform.send_control(agent_id, "play", room_id=room_id)
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
    assert _statuses(target, message_id) == [500, 200]


async def test_an_interrupt_in_the_claim_window_consumes_once_and_reopens_nothing(
    platform: Platform,
) -> None:
    """An interrupt while the bridge's claim is in flight: the claim is not cut off
    (its answer is awaited), nothing is forwarded, and the message is consumed on
    that one claim. Cut off, the claim could still land after the consuming mark and
    re-open the message (band-client-rest 0.0.51: a claim after `processed` opens a
    new attempt), for `/next` to serve and a restart to forward."""
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        hold = platform.faults.hold_rest("processing", count=1)
        message_id = platform.post_message(room_id, user_id, "interrupted while claimed")
        with trio.fail_after(5):
            await hold.arrived.wait()
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            await run.bridge.wait_until(lambda: ident.counters.cancelled == 1)
            hold.release()  # the claim lands now: the interrupt's mark must come after it
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
            await run.bridge.wait_until(lambda: ident.rooms_idle)
    assert _messages(target) == []  # never forwarded
    assert platform.stats["reopened"] == 0
    claims = [e for e in platform.log() if e.kind == "rest" and (e.path or "").endswith(
        f"{message_id}/processing")]  # fmt: skip
    assert [e.status for e in claims] == [200]  # one claim, never made again
    assert platform.delivery(message_id)[agent_id] == {"status": "processed", "attempts": 1}


async def test_a_graceful_stop_ends_a_forward_waiting_between_two_sends_at_once(
    platform: Platform,
) -> None:
    """The backoff is part of the forward, but it is no work in hand: a graceful stop
    does not wait it out (nor its shutdown grace), sends nothing more, and leaves the
    message `processing` for the next run."""
    agent_id, room_id, user_id = seeded(platform)
    policy = BridgePolicy(retry_first=60, shutdown_grace=30)
    async with open_recording_target() as target:
        async with running_bridge([identity(platform, target.url)], bridge_policy=policy) as run:
            ident = run.bridge.identities[agent_id]
            target.fail(500)
            message_id = platform.post_message(room_id, user_id, "fails, then the bridge stops")
            with trio.fail_after(5):
                await run.bridge.wait_until(lambda: ident.counters.failed == 1)
            started = trio.current_time()
        assert trio.current_time() - started < 5  # not the 60 s backoff, nor the 30 s grace
        assert ident.counters.cancelled == 0  # a shutdown, not a signal
    assert _statuses(target, message_id) == [500]
    assert _status(platform, message_id) == "processing"
