"""What broke when band-trio was tried as a demanding user would (and an attacker).

Each test holds one fix, over real loopback sockets.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
from test_signals import Gate

from band_trio import Policy, Turn
from band_trio.platform import Platform, open_platform
from band_trio.platform._store import Delivery
from support import Recorder, all_processed, replies, running_agent, status, ws_opens

DEADLINE = 10


async def test_a_message_over_a_mebibyte_reaches_the_agent_and_the_signal_behind_it_too(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    gate = Gate()

    async def reply_within_the_cap(turn: Turn) -> None:
        await gate.release.wait()  # an agent's message is at most 512 KiB (band-client-rest)
        await turn.reply(f"done: {turn.message.content[: 512 * 1024 - 6]}")

    adapter = Recorder(reply_within_the_cap)
    big = "x" * (2 * 1024 * 1024)  # trio-websocket's own limit is 1 MiB
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            first = platform.post_message(info.room_id, info.user_id, "first")
            await adapter.wait_for(lambda: adapter.calls == ["first"])
            large = platform.post_message(info.room_id, info.user_id, big)  # a 2 MiB push...
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)  # ...then
            await platform.wait_until(lambda: status(platform, first) == "processed")
            assert adapter.cancelled == ["first"]
            gate.release.set()
            await platform.wait_until(lambda: status(platform, large) == "processed")
            # the agent's own 512 KiB reply is echoed back to it too, on the same socket
            assert replies(platform, info.room_id) == [f"done: {big[: 512 * 1024 - 6]}"]
            assert running.agent.connected
    assert ws_opens(platform) == 1  # never disconnected (1009) by the size
    assert running.agent.stats.bad_frames == 0


async def serve_until(
    port: int,
    db: Path,
    stop: trio.Event,
    gone: trio.Event,
    *,
    task_status: trio.TaskStatus[Platform] = trio.TASK_STATUS_IGNORED,
) -> None:
    """One life of a platform on `port` and `db`, until `stop`; `gone` once it has
    stopped listening."""
    try:
        async with open_platform(port=port, db=db) as platform:
            task_status.started(platform)
            await stop.wait()
    finally:
        gone.set()


async def test_a_reply_posted_while_the_platform_restarts_is_retried_not_failed(
    tmp_path: Path, autojump_clock: object
) -> None:
    db = tmp_path / "band.db"
    release = trio.Event()

    async def reply_when_released(turn: Turn) -> None:
        await release.wait()
        await turn.reply("made it")

    adapter = Recorder(reply_when_released)
    policy = Policy(rest_retry_base=0.5, reconnect_base=0.05, reconnect_cap=0.2)
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            stop_first, stop_second = trio.Event(), trio.Event()
            first_gone, second_gone = trio.Event(), trio.Event()
            first: Platform = await nursery.start(serve_until, 0, db, stop_first, first_gone)
            info = first.info
            assert info.room_id and info.user_id and info.agent_id
            port = int(info.rest_url.rsplit(":", 1)[1])
            async with running_agent(first, adapter, policy=policy):
                message = first.post_message(info.room_id, info.user_id, "reply late")
                await adapter.wait_for(lambda: adapter.calls == ["reply late"])
                stop_first.set()
                await first_gone.wait()  # the platform is away...
                release.set()  # ...as the adapter posts its reply: the connection is refused
                await trio.sleep(1.0)  # the outage lasts a second (retries at 0.5, 1.5, ...)
                second: Platform = await nursery.start(
                    serve_until, port, db, stop_second, second_gone
                )
                await second.wait_until(lambda: status(second, message) == "processed")
            assert replies(second, info.room_id) == ["made it"]
            assert adapter.finished == ["reply late"]
            stop_second.set()


async def test_a_message_another_client_reopens_is_never_answered_again(
    platform: Platform,
) -> None:
    """A claim of a `processed` message re-opens it and `/next` serves it again
    (band-client-rest 0.0.51: delivery is at-least-once). band-trio re-opens nothing
    itself, and dedupes by message id: a copy re-opened by another client with the
    same key (here: a claim sent by hand) is never answered a second time."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            message = platform.post_message(info.room_id, info.user_id, "done once")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            assert platform.stats["reopened"] == 0  # band-trio claimed it once, marked it
            key = info.api_key or ""
            async with httpx2.AsyncClient(base_url=info.rest_url, headers={"X-API-Key": key}) as c:
                late = await c.post(
                    f"/api/v1/agent/chats/{info.room_id}/messages/{message}/processing"
                )
            assert late.status_code == 200 and late.json()["data"]["attempt_number"] == 2
            assert status(platform, message) == "processing"  # re-opened: /next serves it
            opens, mark = ws_opens(platform), platform.request_log.next_seq
            platform.faults.drop_socket(info.agent_id)  # the reconnect's catch-up meets it
            newer = platform.post_message(info.room_id, info.user_id, "and this")

            def walked_past() -> bool:  # `/next` kept serving it: the catch-up scanned on
                return any(
                    e.kind == "rest" and e.method == "GET" and e.path and e.query
                    and e.path.endswith("/messages")
                    for e in platform.log(mark)
                )  # fmt: skip

            await platform.wait_until(
                lambda: (
                    ws_opens(platform) > opens
                    and status(platform, newer) == "processed"
                    and walked_past()
                )
            )
    assert adapter.calls == ["done once", "and this"]
    assert replies(platform, info.room_id) == ["echo: done once", "echo: and this"]
    assert platform.stats["reopened"] == 1  # the hand-made claim only


async def test_rooms_whose_ids_need_encoding_are_served(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.user_id
    odd = ["q?x=1", "h#frag", "pct%41", "sp ace", "ünï", "a:b"]
    for room_id in [*odd, "pctA"]:  # "pct%41" must not be taken for "pctA"
        platform.create_room(title=room_id, participants=[info.user_id, info.agent_id], id=room_id)
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            assert set(odd) <= set(running.agent.rooms)
            posted = {r: platform.post_message(r, info.user_id, f"in {r}") for r in odd}
            await platform.wait_until(all_processed(platform, posted.values()))
    for room_id in odd:
        assert replies(platform, room_id) == [f"echo: in {room_id}"]
    assert replies(platform, "pctA") == []
    assert platform.stats["unhandled_routes"] == 0


async def test_a_claim_refused_as_already_processed_takes_it_as_done(
    platform: Platform,
) -> None:
    """The API documents no such refusal (a claim re-opens a `processed` message), but
    a platform stricter than its docs (`keep_processed`) answers 409
    `already_processed`: the runtime takes that message as done, not as a failure."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    adapter = Recorder()
    platform.faults.keep_processed()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            hold = platform.faults.hold_rest("processing")
            message = platform.post_message(info.room_id, info.user_id, "consumed meanwhile")
            await hold.arrived.wait()
            # consumed behind the agent's back while its claim is held
            seq = platform.store.message(message).seq  # type: ignore[union-attr]
            platform.store.set_delivery(seq, info.agent_id, Delivery("processed", 1, 1))
            hold.release()
            room = running.agent.rooms[info.room_id]
            await running.agent.wait_until(lambda: room.standing(message) == "completed")
    assert adapter.calls == []  # not run, and not marked again
    assert not [e for e in platform.log() if e.path and e.path.endswith(f"{message}/processed")]
