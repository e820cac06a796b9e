"""`band-trio agent` asking the room, as a real process: kill -9 and SIGTERM during the
wait, then a restart. The replay asks again; the old question's answer starts no turn.

The demo adapter asks when a message starts with `ask` (docs/how-to/ask-the-room.md).
"""

from __future__ import annotations

import signal
from pathlib import Path

import trio
from test_commands import process, read_until

from band_trio.platform import Platform
from support import agent_env, claims, status

DEADLINE = 30


def said(platform: Platform, room_id: str) -> list[str]:
    agent_id = platform.info.agent_id
    return [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]


def questions(platform: Platform, room_id: str) -> list[str]:
    return [m for m in said(platform, room_id) if "reply with one of" in m]


def reply(platform: Platform, text: str) -> str:
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    return platform.post_message(
        info.room_id, info.user_id, f"@demo-agent {text}", mentions=[info.agent_id]
    )


async def test_kill_9_during_the_wait_then_the_replay_asks_again_and_the_late_answer_is_noted(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    room = info.room_id
    with trio.fail_after(DEADLINE):
        async with process("agent", env=agent_env(platform)) as proc:
            ask = platform.post_message(room, info.user_id, "ask ship it?", [info.agent_id])
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            proc.kill()
            assert await proc.wait() == -signal.SIGKILL
        late = reply(platform, "approve")  # to the question of the run that died
        async with process("agent", env=agent_env(platform)) as again:
            await platform.wait_until(lambda: len(questions(platform, room)) == 2)
            assert status(platform, late) == "delivered"  # behind the replay, not yet seen
            answer = reply(platform, "deny")
            await platform.wait_until(lambda: status(platform, ask) == "processed")
            await platform.wait_until(lambda: status(platform, late) == "processed")
            again.send_signal(signal.SIGTERM)
            assert again.stderr is not None
            err = await read_until(again.stderr, b"stopping")
            assert await again.wait() == 0
    assert status(platform, answer) == "processed"
    assert claims(platform, late) == 1 and claims(platform, answer) == 1
    first, _ = questions(platform, room)
    words = said(platform, room)
    assert words.count("deny: ask ship it?") == 1  # answered once, by the replay
    assert not any(w.startswith(("echo:", "approve:")) for w in words)
    qid = first.split()[1]
    assert f'Question {qid} is withdrawn: your "approve" was not used.' in words
    assert b"Traceback" not in err


async def test_sigterm_during_the_wait_stops_at_once_and_the_restart_asks_again(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    room = info.room_id
    with trio.fail_after(DEADLINE):
        async with process("agent", env=agent_env(platform)) as proc:
            ask = platform.post_message(room, info.user_id, "ask ship it?", [info.agent_id])
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(5):  # not the 30 s shutdown grace: nobody is working
                assert await proc.wait() == 0
        assert status(platform, ask) == "processing"
        async with process("agent", env=agent_env(platform)):
            await platform.wait_until(lambda: len(questions(platform, room)) == 2)
            reply(platform, "approve")
            await platform.wait_until(lambda: status(platform, ask) == "processed")
    assert said(platform, room).count("approve: ask ship it?") == 1


async def test_while_busy_steer_offers_what_arrives_during_the_wait_as_guidance(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    room = info.room_id
    env = {**agent_env(platform), "BAND_WHILE_BUSY": "steer"}
    with trio.fail_after(DEADLINE):
        async with process("agent", env=env):
            ask = platform.post_message(room, info.user_id, "ask ship it?", [info.agent_id])
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            hint = reply(platform, "ship the blue build")
            await platform.wait_until(lambda: any(
                e.kind == "ws_out" and hint in (e.frame or "") for e in platform.log()
            ))  # fmt: skip
            reply(platform, "approve")
            await platform.wait_until(lambda: status(platform, ask) == "processed")
            await platform.wait_until(lambda: status(platform, hint) == "processed")
    assert said(platform, room)[-1] == (
        "approve: ask ship it? (guidance: @demo-agent ship the blue build)"
    )


async def test_an_answer_to_a_dead_run_s_question_starts_no_turn_even_if_the_replay_does_not_ask(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    room = info.room_id
    here = str(Path(__file__).parent)
    env = {**agent_env(platform), "PYTHONPATH": here}
    adapter = ["--adapter", "asking_adapter:asking"]
    with trio.fail_after(DEADLINE):
        async with process("agent", *adapter, env=env) as proc:
            job = platform.post_message(room, info.user_id, "tidy up", [info.agent_id])
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            proc.kill()
            assert await proc.wait() == -signal.SIGKILL
        late = reply(platform, "approve")
        quiet = {**env, "ASKING_ADAPTER_QUIET": "1"}
        async with process("agent", *adapter, env=quiet):
            await platform.wait_until(lambda: status(platform, late) == "processed")
    assert status(platform, job) == "processed"
    words = said(platform, room)
    assert words.count("went ahead: tidy up") == 1
    assert not any("approve" in w and w.startswith("went ahead") for w in words)
    assert any(w.endswith('is withdrawn: your "approve" was not used.') for w in words)


async def test_kill_9_after_guidance_was_taken_replays_the_turn_then_the_guidance_alone(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    room = info.room_id
    here = str(Path(__file__).parent)
    env = {**agent_env(platform), "PYTHONPATH": here, "BAND_WHILE_BUSY": "steer"}
    adapter = ["--adapter", "asking_adapter:asking"]
    with trio.fail_after(DEADLINE):
        async with process("agent", *adapter, env={**env, "ASKING_ADAPTER_TAKE": "1"}) as proc:
            job = platform.post_message(room, info.user_id, "tidy up", [info.agent_id])
            await platform.wait_until(lambda: status(platform, job) == "processing")
            hint = platform.post_message(room, info.user_id, "skip the logs", [info.agent_id])
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            assert status(platform, hint) == "processing"  # taken: claimed with the turn
            proc.kill()
            assert await proc.wait() == -signal.SIGKILL
        async with process("agent", *adapter, env={**env, "ASKING_ADAPTER_QUIET": "1"}):
            await platform.wait_until(lambda: status(platform, hint) == "processed")
    assert status(platform, job) == "processed"
    words = said(platform, room)
    assert words.count("went ahead: tidy up") == 1  # the replay, once
    assert words.count("went ahead: skip the logs") == 1  # then the guidance, alone, once
    assert words.index("went ahead: tidy up") < words.index("went ahead: skip the logs")
