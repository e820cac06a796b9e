"""`Turn.ask` over real loopback sockets: answered from the room, ended by a signal.

People answer as they would on Band: mentioning the agent (`@handle approve`),
so the message reaches only it. An answer is consumed as a control — claimed,
marked processed, never a turn — and everything else a reply can be (from the
wrong person, a second one, a late one) is consumed with a note.
"""

from __future__ import annotations

import pytest
import trio
from test_while_busy import pushed

from band_trio import Turn, WhileBusy
from band_trio.platform import Platform
from support import (
    Recorder,
    each_done,
    replies,
    rooms_with_the_agent,
    running_agent,
    seeded,
    status,
)

DEADLINE = 10


class Asker:
    """Asks before it answers; records what it was told."""

    def __init__(self, *, answer_within: float | None = None) -> None:
        self.answers: list[str] = []
        self.answer_within = answer_within

    async def __call__(self, turn: Turn) -> None:
        if turn.message.content.startswith("deploy"):
            answer = await turn.ask("Deploy to production?", answer_within=self.answer_within)
            self.answers.append(answer)
            await turn.reply(f"told {answer}")
        else:
            await turn.reply(f"echo: {turn.message.content}")


def questions(platform: Platform, room: str) -> list[str]:
    return [r for r in replies(platform, room) if "reply with one of" in r]


def handle_of(platform: Platform, agent: str) -> str:
    handle = platform.store.agents[agent].handle
    assert handle
    return handle


def answer(platform: Platform, room: str, user: str, agent: str, text: str) -> str:
    """A reply as a person sends it on Band: mentioning the agent."""
    handle = handle_of(platform, agent)
    return platform.post_message(room, user, f"@{handle} {text}", mentions=[agent])


async def asked(platform: Platform, room: str, count: int = 1) -> None:
    await platform.wait_until(lambda: len(questions(platform, room)) >= count)


async def test_a_question_is_answered_by_a_reply_that_mentions_the_agent(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    asker = Asker()
    adapter = Recorder(asker)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await asked(platform, room)
            reply = answer(platform, room, user, agent, "Approve.")
            await platform.wait_until(lambda: status(platform, deploy) == "processed")
            await platform.wait_until(lambda: status(platform, reply) == "processed")
    assert asker.answers == ["approve"]
    assert adapter.calls == ["deploy"]  # the answer never reached the adapter
    (question,) = questions(platform, room)
    assert question.endswith("reply with one of: approve, deny\n\nDeploy to production?")
    assert replies(platform, room)[-1] == "told approve"
    assert platform.delivery(reply)[agent]["attempts"] == 1


async def test_an_interrupt_ends_the_wait_consumes_the_message_and_withdraws_it(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    asker = Asker()
    adapter = Recorder(asker)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await asked(platform, room)
            platform.send_control(agent, "interrupt", room_id=room, reason="not now")
            await platform.wait_until(lambda: status(platform, deploy) == "processed")
            await platform.wait_until(
                lambda: any("withdrawn" in r for r in replies(platform, room))
            )
            late = answer(platform, room, user, agent, "approve")
            await platform.wait_until(lambda: status(platform, late) == "processed")
            await platform.wait_until(lambda: "was not used" in replies(platform, room)[-1])
    assert adapter.calls == ["deploy"]  # the late answer started no turn
    assert adapter.cancelled == ["deploy"]
    assert asker.answers == []
    said = replies(platform, room)
    assert "withdrawn: the work was interrupted" in said[1]
    assert "is withdrawn (the work was interrupted)" in said[2]


async def test_stop_then_play_replays_the_turn_which_asks_again(platform: Platform) -> None:
    agent, room, user = seeded(platform)
    asker = Asker()
    adapter = Recorder(asker)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await asked(platform, room)
            platform.send_control(agent, "stop", room_id=room)
            await adapter.wait_for(lambda: adapter.cancelled == ["deploy"])
            assert status(platform, deploy) == "processing"  # left for the replay
            platform.send_control(agent, "play", room_id=room)
            await asked(platform, room, 2)
            reply = answer(platform, room, user, agent, "deny")
            await platform.wait_until(lambda: status(platform, deploy) == "processed")
            await platform.wait_until(lambda: status(platform, reply) == "processed")
    assert adapter.calls == ["deploy", "deploy"]
    assert asker.answers == ["deny"]
    assert replies(platform, room)[-1] == "told deny"


async def test_replies_from_someone_else_and_in_a_burst_are_consumed_with_a_note(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    other = platform.create_user(name="Mallory", handle="mallory").id
    platform.add_participant(room, other)
    gate = trio.Event()

    async def ask_then_wait(turn: Turn) -> None:
        if turn.message.content != "deploy":
            await turn.reply(f"echo: {turn.message.content}")
            return
        told = await turn.ask("Deploy?")
        await gate.wait()  # answered: the turn runs on while the burst lands
        await turn.reply(f"told {told}")

    adapter = Recorder(ask_then_wait)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await asked(platform, room)
            wrong = answer(platform, room, other, agent, "approve")
            await platform.wait_until(lambda: status(platform, wrong) == "processed")
            burst = [answer(platform, room, user, agent, w) for w in ("deny", "approve", "DENY")]
            await platform.wait_until(
                lambda: all(status(platform, m) == "processed" for m in burst)
            )
            gate.set()
            await adapter.wait_for(lambda: adapter.finished == ["deploy"])
            again = answer(platform, room, user, agent, "approve")  # a double press, late
            after = answer(platform, room, user, agent, "what next?")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            assert status(platform, again) == "processed"
    assert status(platform, deploy) == "processed"
    assert adapter.calls == ["deploy", f"@{handle_of(platform, agent)} what next?"]
    said = replies(platform, room)
    assert "is for the people it mentions" in said[1]
    assert sum('answered already ("deny")' in r for r in said) == 3
    assert "told deny" in said


async def test_no_answer_in_time_takes_the_default_and_says_so(platform: Platform) -> None:
    agent, room, user = seeded(platform)
    asker = Asker(answer_within=0.2)
    adapter = Recorder(asker)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await platform.wait_until(lambda: status(platform, deploy) == "processed")
    assert asker.answers == ["deny"]
    said = replies(platform, room)
    assert 'withdrawn: no answer within 0.2s; went ahead with "deny"' in said[1]
    assert said[-1] == "told deny"


async def test_an_answer_while_the_room_steers_is_the_answer_and_the_rest_is_guidance(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    taken: list[str] = []

    async def ask_and_listen(turn: Turn) -> None:
        if turn.message.content != "deploy":
            await turn.reply(f"echo: {turn.message.content}")
            return
        told = await turn.ask("Deploy?")
        taken.extend(m.content for m in turn.take_guidance())
        await turn.reply(f"told {told}")

    adapter = Recorder(ask_and_listen)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await asked(platform, room)
            note = platform.post_message(room, user, "use the blue build", mentions=[agent])
            await platform.wait_until(lambda: pushed(platform, [note]))
            reply = answer(platform, room, user, agent, "approve")
            await platform.wait_until(lambda: status(platform, deploy) == "processed")
            await platform.wait_until(lambda: status(platform, note) == "processed")
    assert status(platform, reply) == "processed"
    assert taken == ["use the blue build"]
    assert adapter.calls == ["deploy"]  # neither the answer nor the guidance ran alone
    assert replies(platform, room)[-1] == "told approve"


async def test_a_graceful_stop_does_not_wait_for_a_person(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    agent, room, user = seeded(platform)
    adapter = Recorder(Asker())
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as handle:
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await asked(platform, room)
            with trio.fail_after(2):  # the shutdown grace is 30 s
                result = await handle.agent.stop()
            handle.stop_result = result
    assert status(platform, deploy) == "processing"  # left for the replay, which asks again
    assert adapter.cancelled == ["deploy"]
    assert "waiting up to" not in caplog.text  # it never said it would wait 30 s


async def test_an_answer_posted_while_the_agent_was_disconnected_is_found(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    asker = Asker()
    adapter = Recorder(asker)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            deploy = platform.post_message(room, user, "deploy", mentions=[agent])
            await asked(platform, room)
            assert platform.faults.drop_socket(agent)
            reply = answer(platform, room, user, agent, "approve")  # pushed to nobody
            await platform.wait_until(lambda: status(platform, deploy) == "processed")
    assert status(platform, reply) == "processed"
    assert asker.answers == ["approve"]
    assert adapter.calls == ["deploy"]


async def test_forty_rooms_asking_at_once_answered_in_one_burst(platform: Platform) -> None:
    agent, _, user = seeded(platform)
    rooms = rooms_with_the_agent(platform, 40)
    asker = Asker()
    adapter = Recorder(asker)
    with trio.fail_after(DEADLINE * 3):
        async with running_agent(platform, adapter) as handle:
            asks = [platform.post_message(r, user, "deploy", mentions=[agent]) for r in rooms]
            await platform.wait_until(each_done(rooms, lambda r: bool(questions(platform, r))))
            answers = [answer(platform, r, user, agent, "approve") for r in rooms]
            answers += [answer(platform, r, user, agent, "deny") for r in rooms]  # surplus
            await platform.wait_until(
                each_done(asks + answers, lambda m: status(platform, m) == "processed")
            )
    assert asker.answers == ["approve"] * 40
    assert sorted(adapter.calls) == ["deploy"] * 40
    assert all(replies(platform, r).count("told approve") == 1 for r in rooms)
    assert handle.stop_result is not None and not handle.stop_result.overran
