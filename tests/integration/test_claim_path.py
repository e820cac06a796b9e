"""Every path that could claim a consumed message again, against the documented rule.

band-client-rest 0.0.51: a `/processing` after `processed` opens a new attempt, so
`/next` serves the message again (the embedded platform does the same by default,
and counts it: `stats["reopened"]`). band-trio must never send one: each message is
answered at most once, and nothing it has consumed is re-opened — whatever lands
in the claim window, during settling, across a reconnect or a stop and play.
"""

from __future__ import annotations

import httpx2
import trio

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, claims, replies, running_agent, status, ws_opens

DEADLINE = 10


def marks(platform: Platform, message_id: str, mark: str = "processed") -> list[int | None]:
    return [
        e.status
        for e in platform.log()
        if e.kind == "rest" and (e.path or "").endswith(f"/{message_id}/{mark}")
    ]


async def test_a_mark_cut_off_by_its_grace_is_retried_without_a_claim(
    platform: Platform,
) -> None:
    """The `processed` mark is held past the settle grace, so it stays ack-pending and
    the next pass retries it, while the first mark, which the platform had received,
    lands meanwhile. A retry that claimed first would re-open the message; the
    retried mark alone finds no live attempt (422) and takes it as settled."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    policy = Policy(settle_grace=0.2, cleanup_grace=0.2)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            first_mark = platform.faults.hold_rest("processed", count=1)
            message = platform.post_message(info.room_id, info.user_id, "marked slowly")
            await first_mark.arrived.wait()
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.standing(message) == "ack_pending")
            retry_claim = platform.faults.hold_rest("processing", count=1)
            retried = len(platform.log())
            # the retry comes from a pass: its /next serves the message (processing)
            await platform.wait_until(
                lambda: retry_claim.held == 1 or len(marks(platform, message)) > 0
            )
            first_mark.release()  # the first mark lands: processed
            await platform.wait_until(lambda: status(platform, message) == "processed")
            retry_claim.release()  # whatever the retry sent, it lands after
            await running.agent.wait_until(lambda: room.standing(message) == "completed")
            assert retried > 0
    assert adapter.calls == ["marked slowly"]
    assert replies(platform, info.room_id) == ["echo: marked slowly"]
    assert platform.stats["reopened"] == 0
    assert claims(platform, message) == 1  # the turn's own, never again
    assert platform.delivery(message)[info.agent_id] == {"status": "processed", "attempts": 1}


async def test_a_reconnect_during_settling_reopens_nothing(platform: Platform) -> None:
    """The socket drops while the `processed` mark is in flight; the reconnect's
    catch-up finds the message still `processing` and must not claim it again."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            mark = platform.faults.hold_rest("processed", count=1)
            message = platform.post_message(info.room_id, info.user_id, "settling")
            await mark.arrived.wait()
            opens = ws_opens(platform)
            assert platform.faults.drop_socket(info.agent_id)
            await running.agent.wait_until(lambda: running.agent.connected)
            await platform.wait_until(lambda: ws_opens(platform) > opens)
            mark.release()
            await platform.wait_until(lambda: status(platform, message) == "processed")
            after = platform.post_message(info.room_id, info.user_id, "after")
            await platform.wait_until(lambda: status(platform, after) == "processed")
    assert adapter.calls == ["settling", "after"]
    assert platform.stats["reopened"] == 0
    assert claims(platform, message) == 1


async def test_a_replay_after_play_keeps_its_attempt_and_reopens_nothing(
    platform: Platform,
) -> None:
    """Stop mid-turn leaves the message `processing`; play replays it on the same
    attempt (a claim of a `processing` message is a no-op), answered once."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered = trio.Event()
    go = trio.Event()

    async def once_stopped(turn: Turn) -> None:
        entered.set()
        await go.wait()
        await turn.reply(f"done: {turn.message.content}")

    adapter = Recorder(once_stopped)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            message = platform.post_message(info.room_id, info.user_id, "stop me")
            await entered.wait()
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.stopped and room.running is None)
            go.set()
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            platform.send_control(info.agent_id, "play", room_id=info.room_id)  # a second
            opens = ws_opens(platform)
            assert platform.faults.drop_socket(info.agent_id)  # and a rejoin's catch-up
            later = platform.post_message(info.room_id, info.user_id, "later")
            await platform.wait_until(
                lambda: ws_opens(platform) > opens and status(platform, later) == "processed"
            )
    assert adapter.calls == ["stop me", "stop me", "later"]  # aborted once, then answered
    assert replies(platform, info.room_id) == ["done: stop me", "done: later"]
    assert platform.stats["reopened"] == 0
    assert platform.delivery(message)[info.agent_id] == {"status": "processed", "attempts": 1}


async def test_a_list_whose_cursor_never_moves_ends_the_scan(platform: Platform) -> None:
    """A hostile (or broken) platform answers every page of the unprocessed list with
    `has_more: true` and the same cursor: the catch-up's scan past a stuck head stops
    at the repeated cursor instead of asking for ever."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    policy = Policy(reconcile_interval=0.05, reconcile_interval_max=0.05)
    endless = b'{"data": [], "metadata": {"has_more": true, "limit": 100, "next_cursor": "7"}}'
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy):
            done = platform.post_message(info.room_id, info.user_id, "done")
            await platform.wait_until(lambda: status(platform, done) == "processed")
            key = info.api_key or ""
            async with httpx2.AsyncClient(base_url=info.rest_url, headers={"X-API-Key": key}) as c:
                await c.post(f"/api/v1/agent/chats/{info.room_id}/messages/{done}/processing")
            # /next now serves a message this agent completed: each reconcile scans past it
            platform.faults.fail_rest("list_messages", 200, count=1_000_000, body=endless)
            mark = platform.request_log.next_seq

            def scans() -> int:
                return sum(
                    1 for e in platform.log(mark)
                    if e.kind == "rest" and e.method == "GET"
                    and (e.path or "").endswith("/messages")
                )  # fmt: skip

            await platform.wait_until(lambda: scans() >= 2)
            # the pass must end, or the push below would wait behind it for ever
            after = platform.post_message(info.room_id, info.user_id, "still answering")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            repeated = scans()
            platform.faults.clear()
    assert adapter.calls == ["done", "still answering"]
    assert repeated < 1000  # two requests a scan (the cursor repeated), not a million


async def test_a_mark_that_finds_no_live_attempt_takes_the_message_as_settled(
    platform: Platform,
) -> None:
    """Another client with the same key marked the message while the adapter ran: the
    turn's own mark is answered 422 (no live attempt). The message is settled, not
    left ack-pending for retries that could never land (nor claimed to make one)."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    entered, go = trio.Event(), trio.Event()

    async def slow(turn: Turn) -> None:
        entered.set()
        await go.wait()
        await turn.reply("done")

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(slow)) as running:
            message = platform.post_message(info.room_id, info.user_id, "marked elsewhere")
            await entered.wait()
            key = info.api_key or ""
            async with httpx2.AsyncClient(base_url=info.rest_url, headers={"X-API-Key": key}) as c:
                mark = f"/api/v1/agent/chats/{info.room_id}/messages/{message}/processed"
                assert (await c.post(mark)).status_code == 200
            go.set()
            room = running.agent.rooms[info.room_id]
            await platform.wait_until(lambda: marks(platform, message) == [200, 422])
            await running.agent.wait_until(lambda: room.standing(message) == "completed")
    assert claims(platform, message) == 1
    assert platform.stats["reopened"] == 0


async def test_an_interrupt_whose_claim_was_refused_as_stopped_is_consumed_after_play(
    platform: Platform,
) -> None:
    """An interrupt in the claim window, then a stop whose gate answers the claim 204:
    the claim opened no attempt, so the consuming mark needs a claim of its own, after
    play. (Without one, the mark finds no attempt, 422, and the message would be taken
    as settled while still `delivered`: lost.) Claiming is safe here: no mark of ours
    can have landed without an attempt."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    policy = Policy(reconcile_interval=0.05, reconcile_interval_max=0.05)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            hold = platform.faults.hold_rest("processing", count=1)
            message = platform.post_message(info.room_id, info.user_id, "interrupted, stopped")
            await hold.arrived.wait()
            room = running.agent.rooms[info.room_id]
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await running.agent.wait_until(lambda: room.stopped)
            hold.release()  # answered 204: the gate is closed
            await running.agent.wait_until(lambda: room.standing(message) == "ack_pending")
            assert status(platform, message) == "delivered"
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            await running.agent.wait_until(lambda: room.standing(message) == "completed")
    assert adapter.calls == []  # consumed, never run
    claimed = [
        e.status
        for e in platform.log()
        if e.kind == "rest" and (e.path or "").endswith(f"{message}/processing")
    ]
    assert claimed[0] == 204 and claimed[-1] == 200 and claimed.count(200) == 1
    assert platform.stats["reopened"] == 0
