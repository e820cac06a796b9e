"""The message lifecycle (docs/reference/runtime.md), end to end over loopback sockets."""

from __future__ import annotations

import trio
import trio.testing

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, all_processed, replies, running_agent, seeded, status

DEADLINE = 10


async def test_backlog_and_live_messages_are_answered_and_processed(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    waiting = platform.post_message(info.room_id, info.user_id, "waiting before start")
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            await platform.wait_until(lambda: status(platform, waiting) == "processed")
            live = platform.post_message(info.room_id, info.user_id, "live one")
            await platform.wait_until(lambda: status(platform, live) == "processed")
    assert replies(platform, info.room_id) == ["echo: waiting before start", "echo: live one"]
    # each user message ran the adapter exactly once; the agent's own echoes never did
    assert adapter.calls == ["waiting before start", "live one"]


async def test_backlog_runs_in_platform_order_before_newer_pushes(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    backlog = [platform.post_message(info.room_id, info.user_id, f"old {i}") for i in range(3)]
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            new = platform.post_message(info.room_id, info.user_id, "new")
            await platform.wait_until(all_processed(platform, [*backlog, new]))
    assert adapter.calls == ["old 0", "old 1", "old 2", "new"]


async def test_adapter_error_marks_failed_and_the_room_moves_on(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id

    async def explode_once(turn: Turn) -> None:
        if "boom" in turn.message.content:
            raise RuntimeError("the model fell over")
        await turn.reply("fine")

    adapter = Recorder(explode_once)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            bad = platform.post_message(info.room_id, info.user_id, "boom")
            await platform.wait_until(lambda: status(platform, bad) == "failed")
            good = platform.post_message(info.room_id, info.user_id, "next")
            await platform.wait_until(lambda: status(platform, good) == "processed")
    assert adapter.calls == ["boom", "next"]  # the failed message is not re-run (budget 1)
    failed_marks = [e for e in platform.log() if e.path and e.path.endswith(f"{bad}/failed")]
    assert len(failed_marks) == 1
    assert failed_marks[0].body and "RuntimeError: the model fell over" in failed_marks[0].body
    assert "Traceback" not in failed_marks[0].body
    events = [e for e in platform.log() if e.path and e.path.endswith("/events")]
    assert events and events[0].status == 201


async def test_working_activity_is_reported_and_kept_alive(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    policy = Policy(working_keep_alive=0.02)

    def activity_bodies() -> list[str]:
        return [
            e.body or ""
            for e in platform.log()
            if e.kind == "rest" and e.path and e.path.endswith("/activity")
        ]

    async def think_until_kept_alive(turn: Turn) -> None:
        # keep the turn open until the platform has seen three `working: true` reports
        await platform.wait_until(
            lambda: sum('"working":true' in b for b in activity_bodies()) >= 3
        )
        await turn.reply("done")

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(think_until_kept_alive), policy=policy):
            message = platform.post_message(info.room_id, info.user_id, "think")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            await platform.wait_until(lambda: '"working":false' in activity_bodies()[-1])
    assert sum('"working":true' in b for b in activity_bodies()) >= 3


async def test_claim_happens_before_the_adapter_runs(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    seen: list[str | None] = []

    async def look(turn: Turn) -> None:
        seen.append(status(platform, turn.message.id))
        await turn.reply("ok")

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(look)):
            message = platform.post_message(info.room_id, info.user_id, "hi")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert seen == ["processing"]


async def test_stopping_the_agent_leaves_no_task_behind(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    adapter = Recorder()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            second = platform.create_room(
                title="second", participants=[info.agent_id, info.user_id]
            )
            await platform.wait_until(lambda: second.id in running.agent.rooms)
            for room in (info.room_id, second.id):
                message = platform.post_message(room, info.user_id, "hello")
                await platform.wait_until(lambda m=message: status(platform, m) == "processed")
            assert len(running.agent.rooms) == 2
        assert running.tasks.spawned > 10  # rooms, turns, reader, heartbeat... were tracked
    assert running.stop_result is not None and running.stop_result.graceful
    assert running.tasks.root_exited
    assert running.tasks.living == set()  # nothing the agent started outlived it
    await platform.wait_until(lambda: not platform.connected_agents())


async def forever(turn: Turn) -> None:
    await trio.sleep_forever()


async def test_graceful_stop_cancels_a_turn_that_outlives_the_grace(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    adapter = Recorder(forever)
    policy = Policy(shutdown_grace=0.05)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            message = platform.post_message(info.room_id, info.user_id, "forever")
            await adapter.wait_for(lambda: adapter.calls == ["forever"])
    result = running.stop_result
    assert result is not None and not result.graceful
    assert result.cancelled == ((info.room_id, message),)
    assert adapter.cancelled == ["forever"]
    assert status(platform, message) == "processing"  # shutdown is not an interrupt: never marked


async def test_stop_while_reconnecting_ends_the_link_wherever_it_is(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder()) as running:
            platform.faults.refuse_upgrades(1000, 503)
            assert platform.faults.drop_socket(info.agent_id)
            await running.agent.wait_until(lambda: not running.agent.connected)
            await platform.wait_until(lambda: platform.stats.get("upgrades_refused", 0) >= 1)
    assert running.stop_result is not None and running.stop_result.graceful
    assert running.tasks.living == set()


async def test_a_second_stop_waits_for_the_first_and_shares_its_result(platform: Platform) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    adapter = Recorder(forever)
    results: list[object] = []
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=Policy(shutdown_grace=0.2)) as running:
            message = platform.post_message(info.room_id, info.user_id, "forever")
            await adapter.wait_for(lambda: adapter.calls == ["forever"])

            async def stop_and_keep() -> None:
                results.append(await running.agent.stop())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_and_keep)
                nursery.start_soon(stop_and_keep)
    assert len(results) == 2
    assert results[0] is results[1]
    assert results[0] == running.stop_result  # the fixture's own stop got the same answer
    assert running.stop_result is not None
    assert running.stop_result.cancelled == ((info.room_id, message),)


async def test_the_mark_goes_out_before_working_false(platform: Platform) -> None:
    """The final mark is what a restart and the room depend on; `working: false` only
    clears an indicator. Each costs the client a request build, so `working: false`
    waits for the mark's answer: while the mark is held, no `working: false` arrives,
    for a finished turn and for an interrupted one alike."""
    agent_id, room, user = seeded(platform)
    entered = trio.Event()

    async def answer_or_hold(turn: Turn) -> None:
        if turn.message.content == "hold":
            entered.set()
            await trio.sleep_forever()
        await turn.reply("ok")

    def idle_reports(since: int) -> int:
        return sum(
            e.kind == "rest" and (e.path or "").endswith("/activity")
            and '"working":false' in (e.body or "")
            for e in platform.log(since)
        )  # fmt: skip

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(answer_or_hold)):
            for text in ("answer", "hold"):
                hold = platform.faults.hold_rest("processed")
                since = len(platform.log())
                message = platform.post_message(room, user, text)
                if text == "hold":
                    await entered.wait()
                    platform.send_control(agent_id, "interrupt", room_id=room)
                await hold.arrived.wait()
                await trio.testing.wait_all_tasks_blocked(0.05)
                assert idle_reports(since) == 0
                hold.release()
                await platform.wait_until(lambda s=since: idle_reports(s) == 1)
                assert status(platform, message) == "processed"
