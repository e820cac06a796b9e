"""Guidance passed on to a running Copilot turn (`session.send` with `mode: "immediate"`),
over the embedded platform and a real agent in a `WhileBusy.STEER` room, against the
stand-in CLI (tests/adapters/fake_copilot.py, a real subprocess speaking the CLI's
framing), which takes mid-turn input as the real CLI 1.0.102 does and records every
message it got. The real CLI's side of it is on the rotation (test_copilot.py).

People write as on Band, mentioning the agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
from test_copilot_ask import answer, fake_config, questions, received

from band_trio import WhileBusy
from band_trio.adapters import CopilotAdapter, CopilotConfig
from band_trio.platform import Platform
from support import claims, replies, running_agent, seeded, status

DEADLINE = 15
HEARD = "heard: Alice added, while you were working on this:"


class Steered(CopilotAdapter):
    """The adapter, with a way to wait until the CLI accepted a message of guidance."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.passed = 0
        self._changed = trio.Event()

    async def _guide(self, *args: Any) -> None:
        await super()._guide(*args)
        self.passed += 1
        self._changed.set()
        self._changed = trio.Event()

    async def until_passed(self, count: int) -> None:
        while self.passed < count:
            await self._changed.wait()


def mode_config(tmp_path: Path, mode: str, **overrides: Any) -> CopilotConfig:
    config = fake_config(tmp_path, **overrides)
    script = Path(config.cli)
    script.write_text(script.read_text().replace(" normal\n", f" {mode}\n"))
    return config


def sends(config: CopilotConfig) -> list[dict[str, Any]]:
    return [m["params"] for m in received(config) if m.get("method") == "session.send"]


def post(platform: Platform, room: str, user: str, agent: str, text: str) -> str:
    handle = platform.store.agents[agent].handle
    return platform.post_message(room, user, f"@{handle} {text}", mentions=[agent])


async def test_guidance_during_a_tool_call_reaches_the_next_model_call_and_the_reply(
    platform: Platform, tmp_path: Path
) -> None:
    agent, room, user = seeded(platform)
    config = fake_config(tmp_path, permissions="ask")
    adapter = Steered(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            asked = platform.post_message(room, user, "[shell] make a file")
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            hint = post(platform, room, user, agent, "use the other file")
            await adapter.until_passed(1)  # the CLI has it, for its next model call
            answer(platform, room, user, agent, "allow")
            await platform.wait_until(lambda: status(platform, asked) == "processed")
            await platform.wait_until(lambda: status(platform, hint) == "processed")
    said = [r for r in replies(platform, room) if not r.startswith("Question q-")]
    assert said == [f"ran the tool; {HEARD} @{handle(platform, agent)} use the other file"]
    assert claims(platform, hint) == 1  # claimed once, when taken; never answered alone
    prompt, guidance = sends(config)
    assert "mode" not in prompt
    assert guidance["mode"] == "immediate" and guidance["sessionId"] == prompt["sessionId"]
    assert guidance["prompt"].startswith("Alice added, while you were working on this: ")


async def test_guidance_during_the_last_model_call_is_answered_before_the_turn_ends(
    platform: Platform, tmp_path: Path
) -> None:
    agent, room, user = seeded(platform)
    config = fake_config(tmp_path)
    adapter = Steered(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            asked = platform.post_message(room, user, "[hold] go on")
            await platform.wait_until(lambda: status(platform, asked) == "processing")
            hint = post(platform, room, user, agent, "and say hi")  # ends the held call
            await platform.wait_until(lambda: status(platform, asked) == "processed")
            await platform.wait_until(lambda: status(platform, hint) == "processed")
            after = platform.post_message(room, user, "next")
            await platform.wait_until(lambda: status(platform, after) == "processed")
    # the CLI took it up after the turn's last call and answered it in the same run:
    # one reply, holding both answers
    assert replies(platform, room) == [
        f"fake answer 1\n\n{HEARD} @{handle(platform, agent)} and say hi",
        "fake answer 3",
    ]
    assert claims(platform, hint) == 1
    assert [s.get("mode") for s in sends(config)] == [None, "immediate", None]


async def test_an_interrupt_after_guidance_aborts_the_session_and_consumes_both(
    platform: Platform, tmp_path: Path
) -> None:
    agent, room, user = seeded(platform)
    config = fake_config(tmp_path, permissions="ask")
    adapter = Steered(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER) as running:
            cut = platform.post_message(room, user, "[shell] make a file")
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            hint = post(platform, room, user, agent, "use the other file")
            await adapter.until_passed(1)
            platform.send_control(agent, "interrupt", room_id=room, reason="no")
            await platform.wait_until(lambda: status(platform, cut) == "processed")
            await platform.wait_until(lambda: status(platform, hint) == "processed")
            after = platform.post_message(room, user, "next")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            stops = running.agent.remote_stops
    assert stops.confirmed == 1
    said = [r for r in replies(platform, room) if not r.startswith("Question q-")]
    assert said == ["fake answer 3"]  # nothing for the cut turn, nor for its guidance
    methods = [m["method"] for m in received(config) if "method" in m]
    turn = methods[methods.index("session.send") :]
    assert turn[:3] == ["session.send", "session.send", "session.abort"]
    assert "interrupted by the user (reason: no)" in sends(config)[-1]["prompt"]  # told why


async def test_a_cli_that_refuses_immediate_gets_it_queued_and_no_more_guidance_is_taken(
    platform: Platform, tmp_path: Path
) -> None:
    agent, room, user = seeded(platform)
    config = mode_config(tmp_path, "nosteer", permissions="ask")
    adapter = Steered(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
            # the first: refused in immediate mode, sent again queued, answered in the turn
            held = platform.post_message(room, user, "[hold] go on")
            await platform.wait_until(lambda: status(platform, held) == "processing")
            hint = post(platform, room, user, agent, "and say hi")
            await platform.wait_until(lambda: status(platform, held) == "processed")
            await platform.wait_until(lambda: status(platform, hint) == "processed")
            # the next: not taken, so it runs as its own turn after this one
            asked = platform.post_message(room, user, "[shell] make a file")
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            later = post(platform, room, user, agent, "and then this")
            answer(platform, room, user, agent, "allow")
            await platform.wait_until(lambda: status(platform, asked) == "processed")
            await platform.wait_until(lambda: status(platform, later) == "processed")
    said = [r for r in replies(platform, room) if not r.startswith("Question q-")]
    assert said == ["fake answer 1\n\nfake answer 2", "ran the tool", "fake answer 4"]
    assert claims(platform, later) == 1
    modes = [s.get("mode") for s in sends(config)]
    assert modes == [None, "immediate", None, None, None]  # refused once, never again


def handle(platform: Platform, agent: str) -> str:
    return platform.store.agents[agent].handle


async def test_a_stop_after_guidance_keeps_both_and_play_runs_each_once_in_order(
    platform: Platform, tmp_path: Path
) -> None:
    agent, room, user = seeded(platform)
    config = fake_config(tmp_path, permissions="ask")
    adapter = Steered(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, while_busy=WhileBusy.STEER) as running:
            asked = platform.post_message(room, user, "[shell] make a file")
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            hint = post(platform, room, user, agent, "use the other file")
            await adapter.until_passed(1)
            platform.send_control(agent, "stop", room_id=room, reason="later")
            room_state = running.agent.rooms[room]
            await running.agent.wait_until(lambda: room_state.running is None)
            assert status(platform, asked) == "processing"  # kept for the replay
            assert status(platform, hint) != "processed"  # kept, for after the replay
            platform.send_control(agent, "play", room_id=room)
            await platform.wait_until(lambda: len(questions(platform, room)) == 2)
            answer(platform, room, user, agent, "allow")
            await platform.wait_until(lambda: status(platform, asked) == "processed")
            await platform.wait_until(lambda: status(platform, hint) == "processed")
    said = [r for r in replies(platform, room) if not r.startswith("Question q-")]
    assert said == ["ran the tool", "fake answer 4"]  # the replay, then the guidance alone
    prompts = [(s.get("mode"), s["prompt"].split("\n")[-1]) for s in sends(config)]
    mention = f"@{handle(platform, agent)} use the other file"
    assert prompts == [
        (None, "[shell] make a file"),
        ("immediate", f"Alice added, while you were working on this: {mention}"),
        (None, "[shell] make a file"),  # after the note that it was stopped
        (None, mention),
    ]
