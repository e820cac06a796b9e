"""The Copilot adapter configured to ask (`permissions="ask"`): a permission request the
allow-list does not grant is put to the room, over the embedded platform and a real agent,
against the stand-in CLI (tests/adapters/fake_copilot.py, a real subprocess speaking the
CLI's framing), which runs the tool only when approved and records every message it got.
The real CLI's side of it is on the rotation (test_copilot.py).

People answer as on Band, mentioning the agent (`@handle allow`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from band_trio.adapters import CopilotAdapter, CopilotConfig
from band_trio.platform import Platform
from support import replies, running_agent, seeded, status

FAKE = Path(__file__).with_name("fake_copilot.py")
DEADLINE = 15


def fake_config(tmp_path: Path, **overrides: Any) -> CopilotConfig:
    script = tmp_path / "copilot-fake"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" normal\n')
    script.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    settings: dict[str, Any] = {
        "cli": str(script),
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "working_directory": str(work),
        "start_deadline": 5.0,
        "kill_grace": 0.5,
    }
    return CopilotConfig(**{**settings, **overrides})


def received(config: CopilotConfig) -> list[dict[str, Any]]:
    assert config.working_directory is not None
    path = Path(config.working_directory) / "received.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def questions(platform: Platform, room: str) -> list[str]:
    return [r for r in replies(platform, room) if " reply with one of: " in r.split("\n")[0]]


def answer(platform: Platform, room: str, user: str, agent: str, text: str) -> str:
    handle = platform.store.agents[agent].handle
    return platform.post_message(room, user, f"@{handle} {text}", mentions=[agent])


async def test_the_room_allows_denies_lets_the_deadline_deny_and_interrupts_a_request(
    platform: Platform, tmp_path: Path
) -> None:
    agent, room, user = seeded(platform)
    config = fake_config(tmp_path, permissions="ask", ask_within=1.0)
    made = Path(str(config.working_directory)) / "made-by-the-model"
    adapter = CopilotAdapter(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            # allow: approved once, and the tool runs
            allowed = platform.post_message(room, user, "[shell] make a file")
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            assert not made.exists()
            yes = answer(platform, room, user, agent, "allow")
            await platform.wait_until(lambda: status(platform, allowed) == "processed")
            assert made.exists()
            made.unlink()
            # deny: rejected, and the CLI is told why
            denied = platform.post_message(room, user, "[shell] again")
            await platform.wait_until(lambda: len(questions(platform, room)) == 2)
            no = answer(platform, room, user, agent, "deny")
            await platform.wait_until(lambda: status(platform, denied) == "processed")
            # no answer within ask_within: deny
            silent = platform.post_message(room, user, "[shell] once more")
            await platform.wait_until(lambda: status(platform, silent) == "processed")
            # an interrupt during the question aborts the session, then rejects the request
            cut = platform.post_message(room, user, "[shell] last")
            await platform.wait_until(lambda: len(questions(platform, room)) == 4)
            platform.send_control(agent, "interrupt", room_id=room, reason="no")
            await platform.wait_until(lambda: status(platform, cut) == "processed")
            withdrawn = "withdrawn: the work was interrupted"
            await platform.wait_until(lambda: any(withdrawn in r for r in replies(platform, room)))
            await platform.wait_until(lambda: status(platform, yes) == "processed")
            await platform.wait_until(lambda: status(platform, no) == "processed")
            stops = running.agent.remote_stops
    assert not made.exists()  # only the approved run made it
    said = [r for r in replies(platform, room) if not r.startswith("Question q-")]
    assert said == [
        "ran the tool",
        "the tool was rejected: the user did not allow it",
        "the tool was rejected: the user did not allow it",
    ]
    first = questions(platform, room)[0]
    assert "reply with one of: allow, deny" in first
    assert "Copilot asks to run a shell command: `touch made-by-the-model`" in first
    assert "Why: Make a file" in first
    sent = [(m["method"], m["params"]) for m in received(config) if "method" in m]
    answers = [
        p["result"] for m, p in sent if m == "session.permissions.handlePendingPermissionRequest"
    ]
    assert [a["kind"] for a in answers] == ["approve-once", "reject", "reject", "reject"]
    assert answers[-1]["feedback"] == "the user stopped this work"
    methods = [m for m, _ in sent if m != "session.detach"]  # detached as the agent stops
    # the session was aborted first, and the request it left open then answered
    assert methods[-2:] == ["session.abort", "session.permissions.handlePendingPermissionRequest"]
    assert stops.confirmed == 1
