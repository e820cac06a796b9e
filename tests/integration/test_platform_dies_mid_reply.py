"""A platform that dies between doing a post and saying so never costs an answer, nor
gives two.

The embedded platform's `drop` fault handles a request (the reply is stored) and cuts
the connection without an answer; `fail` answers without handling it. The agent cannot
tell the two apart from the broken exchange: it looks at the room (`GET .../context`)
and posts again only if its reply is not there (docs/discussion/closing.md).
"""

from __future__ import annotations

import trio

from band_trio import Policy, Turn
from band_trio.platform import Platform
from support import Recorder, claims, errors_posted, replies, running_agent, seeded, status

DEADLINE = 20
FAST = Policy(rest_retry_base=0.05, post_retry_cap=0.2)


def posts_to(platform: Platform, room: str, what: str = "messages") -> list[int | None]:
    """The statuses of the agent's answered `POST .../<what>` in `room` (a dropped
    one has no entry: it was never answered)."""
    return [
        e.status
        for e in platform.log()
        if e.kind == "rest" and e.method == "POST" and (e.path or "").endswith(f"{room}/{what}")
    ]


async def test_a_reply_stored_then_dropped_is_found_and_not_posted_again(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    adapter = Recorder()
    platform.faults.drop_rest("post_message", room_id=room)
    async with running_agent(platform, adapter, policy=FAST):
        message = platform.post_message(room, user, "hello")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert replies(platform, room) == ["echo: hello"]  # stored once: the dropped one
    assert posts_to(platform, room) == []  # never posted again
    assert errors_posted(platform, room) == []
    assert platform.stats["faults_rest_dropped"] == 1


async def test_a_reply_that_was_not_stored_is_posted_again_once(platform: Platform) -> None:
    """A 500: the request was not handled here, but the agent cannot know that; it
    looks, finds nothing, and posts the reply again."""
    _, room, user = seeded(platform)
    platform.faults.fail_rest("post_message", 500, room_id=room)
    async with running_agent(platform, Recorder(), policy=FAST):
        message = platform.post_message(room, user, "hello")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert replies(platform, room) == ["echo: hello"]
    assert posts_to(platform, room) == [500, 201]


async def test_an_earlier_identical_reply_is_not_taken_for_the_lost_one(
    platform: Platform,
) -> None:
    """Two messages posted at once, both answered "done": the first answer lands after
    the second message was created, so only knowing it (its id) keeps it from being
    taken for the second answer, which is lost unstored (a 502)."""
    _, room, user = seeded(platform)

    async def same(turn: Turn) -> None:
        if turn.message.content == "two":
            platform.faults.fail_rest("post_message", 502, room_id=room)
        await turn.reply("done")

    async with running_agent(platform, Recorder(same), policy=FAST):
        first = platform.post_message(room, user, "one")
        second = platform.post_message(room, user, "two")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, second) == "processed")
    assert status(platform, first) == "processed"
    assert replies(platform, room) == ["done", "done"]
    assert posts_to(platform, room) == [201, 502, 201]


async def test_each_of_several_replies_lands_once_with_a_drop_on_each(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)

    async def three(turn: Turn) -> None:
        for n in range(3):
            await turn.reply(f"part {n}")
        await turn.send_event("thinking", message_type="thought")

    platform.faults.drop_rest("post_message", room_id=room, count=3)
    platform.faults.drop_rest("post_event", room_id=room)
    async with running_agent(platform, Recorder(three), policy=FAST):
        message = platform.post_message(room, user, "go")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert replies(platform, room) == ["part 0", "part 1", "part 2"]
    events = [e["content"] for e in platform.store.events(room)]
    assert events == ["thinking"]


async def test_a_dropped_mark_and_a_dropped_reply_end_processed_and_answered_once(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    platform.faults.drop_rest("post_message", room_id=room)
    platform.faults.drop_rest("processed", room_id=room)
    async with running_agent(platform, Recorder(), policy=FAST):
        message = platform.post_message(room, user, "hello")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert replies(platform, room) == ["echo: hello"]
    assert platform.stats["reopened"] == 0


async def test_a_restart_never_runs_a_message_that_used_its_attempts(
    platform: Platform,
) -> None:
    """The attempt budget is the platform's: a restarted agent reads a `failed`
    message's attempts from `/next` and the listing, without claiming it, so it does
    not run it again nor post a second error event; the messages behind it still run."""
    _, room, user = seeded(platform)

    async def fails_once(turn: Turn) -> None:
        if turn.message.content == "broken":
            raise RuntimeError("the adapter broke")
        await turn.reply(f"echo: {turn.message.content}")

    async with running_agent(platform, Recorder(fails_once)):
        broken = platform.post_message(room, user, "broken")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, broken) == "failed")
            await platform.wait_until(lambda: len(errors_posted(platform, room)) == 1)
    for restart in range(2):
        adapter = Recorder(fails_once)
        async with running_agent(platform, adapter):
            later = platform.post_message(room, user, f"later {restart}")
            with trio.fail_after(DEADLINE):
                await platform.wait_until(lambda: status(platform, later) == "processed")  # noqa: B023
        assert adapter.calls == [f"later {restart}"]  # the failed head was walked past
    assert status(platform, broken) == "failed"
    assert claims(platform, broken) == 1
    assert len(errors_posted(platform, room)) == 1
    assert platform.delivery(broken)[seeded(platform)[0]]["attempts"] == 1


async def test_a_message_whose_push_was_lost_in_a_reconnect_runs_in_order_at_once(
    platform: Platform,
) -> None:
    """Pushes queued on the old connection are no sync point for the catch-up after a
    reconnect: a message posted while the agent was away (its push lost) runs right
    after the ones before it, not a reconcile later (60 s by default)."""
    agent_id, room, user = seeded(platform)
    gate = trio.Event()

    async def held(turn: Turn) -> None:
        if turn.message.content == "first":
            await gate.wait()
        await turn.reply(f"echo: {turn.message.content}")

    adapter = Recorder(held)
    policy = FAST.replace(reconnect_base=0.01)
    async with running_agent(platform, adapter, policy=policy) as running:
        agent = running.agent
        platform.post_message(room, user, "first")
        with trio.fail_after(DEADLINE):
            await adapter.wait_for(lambda: adapter.calls == ["first"])
            platform.post_message(room, user, "queued")  # pushed: in the room's queue
            await agent.wait_until(lambda: agent.rooms[room].queued == 1)
            platform.faults.refuse_upgrades(3, 503)
            assert platform.faults.drop_socket(agent_id)
            await platform.wait_until(lambda: platform.faults.upgrades == 1)  # still away
            offline = platform.stats["pushes_offline"]
            away = platform.post_message(room, user, "while away")
            assert platform.stats["pushes_offline"] == offline + 1  # its push is lost
            await agent.wait_until(lambda: agent.rooms[room].joined)  # on the new socket
            gate.set()
            await platform.wait_until(lambda: status(platform, away) == "processed")
        assert adapter.calls == ["first", "queued", "while away"]


async def test_the_turns_reads_wait_through_a_lost_answer(platform: Platform) -> None:
    """A read's answer lost (`drop`) or refused (503) is read again, not a failed turn:
    the history and the participants are GETs, so trying again changes nothing."""
    _, room, user = seeded(platform)

    async def reads(turn: Turn) -> None:
        history = await turn.history()
        people = await turn.participants()
        await turn.reply(f"{len(history)} seen, {len(people)} here")

    platform.faults.drop_rest("context", room_id=room)
    platform.faults.fail_rest("participants", 503, room_id=room, count=4)
    async with running_agent(platform, Recorder(reads), policy=FAST):
        message = platform.post_message(room, user, "look")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert replies(platform, room) == ["1 seen, 2 here"]


async def test_a_platform_that_answers_500_for_ever_is_not_hammered_and_the_turn_fails(
    platform: Platform,
) -> None:
    """Every post answered 500 at once: each is looked for in the room and sent again
    after a pause (capped by `post_retry_cap`), until `post_wait` is over; then the turn
    fails as any failed turn does, its one error event posted."""
    _, room, user = seeded(platform)
    platform.faults.fail_rest("post_message", 500, room_id=room, count=100_000)
    policy = FAST.replace(post_wait=2.0)
    async with running_agent(platform, Recorder(), policy=policy):
        message = platform.post_message(room, user, "hello")
        with trio.fail_after(DEADLINE):
            await platform.wait_until(lambda: status(platform, message) == "failed")
    sent = len(posts_to(platform, room))
    assert 2 <= sent <= 2.0 / 0.05, f"{sent} posts in 2 s"  # the pauses, not a busy loop
    assert replies(platform, room) == []
    assert len(errors_posted(platform, room)) == 1
