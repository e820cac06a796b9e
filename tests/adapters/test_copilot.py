"""The Copilot adapter against the real GitHub Copilot CLI 1.0.102, offline, driven by a real agent.

Every test runs the embedded platform and an agent over loopback, a stubllm 0.1.5
subprocess as the model, and the real CLI (installed by `python3 dev.py test`, found by
tests/peers/copilot.py) between them in BYOK mode. That the CLI really stopped its work
is read on stubllm's side: its streaming generator was cancelled because the CLI closed
the upstream request. A missing CLI fails the tests, naming the fix; they never skip.

The CLI takes one to three seconds to start, so the tests that do not own it share one
`CopilotCli` between the adapters they run (`shared_cli`); the crash test runs an adapter
that owns its CLI, as `band-trio agent` does.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from test_copilot_guidance import Steered

from band_trio import StopOutcome, Turn, WhileBusy
from band_trio.adapters import CopilotAdapter, CopilotCli, CopilotConfig
from band_trio.contract import RemoteStop
from band_trio.platform import Platform
from peers import Peer, shared_stubllm_peer
from peers.copilot import copilot_config
from support import claims, replies, rooms_with_the_agent, running_agent, seeded, status

DEADLINE = 40  # the CLI's start and a slow answer included
SLOW = " ".join(f"w{i:02d}" for i in range(80))  # the "[slow]" fixture's answer
SLOW_CHUNK_MS = 50
"""stubllm's pace for "[slow]" where a stop must reach it mid-stream: 80 chunks, 4 s after
the third is seen, for the stop's way through the agent and the peer process to the
model call (at 10 ms the 0.8 s left could run out at a CI machine's load, and the
stream ended before the stop: no `stream_cancelled`, the test's deadline)."""

GUIDED_CHUNK_MS = 25
"""stubllm's pace where guidance must reach the CLI during the last model call: 1.9 s
left after the third chunk (the stop's way is longer: `SLOW_CHUNK_MS`), and two slow
answers to stream."""


class Observed(CopilotAdapter):
    """The adapter, recording per message the remote stops of its turn (test only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stops: dict[str, tuple[RemoteStop, ...]] = {}
        self._changed = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        try:
            await super().on_turn(turn)
        finally:
            self.stops[turn.message.id] = turn.remote_stops
            self._changed.set()
            self._changed = trio.Event()

    async def settled(self, message: str) -> tuple[RemoteStop, ...]:
        while message not in self.stops:
            await self._changed.wait()
        return self.stops[message]


@asynccontextmanager
async def shared_cli(llm: Peer, **overrides: Any) -> AsyncIterator[CopilotCli]:
    """One real CLI for the block, started and ready (its start is not what is tested)."""
    cli = CopilotCli(copilot_config(llm, **overrides))
    async with cli.running():
        await cli.connection()
        yield cli


def chat_requests(llm: Peer) -> list[dict[str, Any]]:
    """The bodies the CLI sent to stubllm's /v1/chat/completions, in order."""
    return [e["body"] for e in llm.events("request") if e["path"] == "/v1/chat/completions"]


def said(body: dict[str, Any], role: str) -> list[str]:
    """The text of a request's messages of one role (the CLI prefixes a timestamp)."""
    texts = []
    for message in body["messages"]:
        if message["role"] == role:
            content = message.get("content") or ""
            if isinstance(content, list):
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            texts.append(str(content).split("</current_datetime>")[-1].strip())
    return texts


def environment_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def existing(*paths: str) -> list[str]:
    return [path for path in paths if Path(path).exists()]


def group_members(pgid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return found


# -- answers and safety ------------------------------------------------------------------


async def test_answers_in_the_rooms_session_and_the_cli_is_kept_apart_from_the_agent(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, room, user = seeded(platform)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-not-for-the-cli")  # the agent's, not the CLI's
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=0) as llm, shared_cli(llm) as cli:
            adapter = Observed(cli.config, cli=cli)
            async with running_agent(platform, adapter):
                first = platform.post_message(room, user, "[quick] one")
                await platform.wait_until(lambda: status(platform, first) == "processed")
                session = adapter.session(room)
                second = platform.post_message(room, user, "[quick] two")
                await platform.wait_until(lambda: status(platform, second) == "processed")
                assert adapter.session(room) == session
            assert cli.pid is not None
            env = environment_of(cli.pid)
            cwd = os.readlink(f"/proc/{cli.pid}/cwd")
            leads = os.getpgid(cli.pid) == os.getsid(cli.pid) == cli.pid
            requests = chat_requests(llm)
    assert replies(platform, room) == ["quick answer", "quick answer"]
    assert adapter.stops[first] == adapter.stops[second] == ()  # ended on their own
    # one Copilot session holds the conversation: the second request carries the first
    assert said(requests[1], "user") == ["[quick] one", "[quick] two"]
    assert said(requests[1], "assistant") == ["quick answer"]
    assert requests[0]["model"] == "gpt-4o" and requests[0]["stream"] is True
    # the CLI runs offline, in its own folders and process group, with nothing of the
    # agent's environment
    assert leads
    assert cwd == cli.working_directory != os.getcwd()
    assert env["COPILOT_OFFLINE"] == "true" and env["HOME"] == cli.home
    assert "GITHUB_TOKEN" not in env and not any(name.startswith("BAND_") for name in env)
    assert "sk-stub" not in " ".join(env.values())  # the key goes per session, not in env


async def test_tool_permissions_are_denied_unless_the_operator_allows_their_kind(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    _, room, user = seeded(platform)
    caplog.set_level(logging.INFO, logger="band_trio.adapters.copilot")
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=0) as llm, shared_cli(llm) as cli:
            made = Path(cli.working_directory) / "made-by-the-model"
            denying = CopilotAdapter(cli.config, cli=cli)
            async with running_agent(platform, denying):
                asked = platform.post_message(room, user, "[shell] make a file")
                await platform.wait_until(lambda: status(platform, asked) == "processed")
            assert not made.exists()
            [denied] = chat_requests(llm)[-1:]
            config = CopilotConfig(**{**_fields(cli.config), "allow": frozenset({"shell"})})
            allowing = CopilotAdapter(config, cli=cli)
            async with running_agent(platform, allowing):
                again = platform.post_message(room, user, "[shell] make it now")
                await platform.wait_until(lambda: status(platform, again) == "processed")
            assert made.exists()  # in the CLI's own folder
            [granted] = chat_requests(llm)[-1:]
    assert replies(platform, room) == ["the shell tool answered"] * 2
    assert "rejected" in said(denied, "tool")[0]
    assert "does not allow shell" in said(denied, "tool")[0]
    assert "rejected" not in said(granted, "tool")[-1]
    assert "denied Copilot's shell request (touch made-by-the-model)" in caplog.text
    assert "granted Copilot's shell request (touch made-by-the-model)" in caplog.text


def _fields(config: CopilotConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


# -- aborts ------------------------------------------------------------------------------


async def test_interrupt_mid_stream_aborts_the_session_which_answers_the_next_message(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=SLOW_CHUNK_MS) as llm, shared_cli(llm) as cli:
            adapter = Observed(cli.config, cli=cli)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                slow = len(chat_requests(llm)) + 1  # stubllm numbers its requests from 1
                await llm.wait_for(
                    lambda e: e["req"] == slow and e["count"] >= 3, timeout=DEADLINE, event="chunk"
                )
                sent = time.perf_counter()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                cancelled = await llm.wait_for(event="stream_cancelled", timeout=DEADLINE)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                [stop] = await adapter.settled(message)
                session = adapter.session(room)
                after = platform.post_message(room, user, "[quick] next")
                await platform.wait_until(lambda: status(platform, after) == "processed")
                assert adapter.session(room) == session
                stats = running.agent.remote_stops
            last = chat_requests(llm)[-1]
    assert cancelled["req"] == 1 and cancelled["how"] == "cancelled" and cancelled["count"] < 80
    assert (stop.name, stop.outcome) == ("copilot session", StopOutcome.CONFIRMED)
    assert stop.detail == "the session went idle (aborted)"
    assert stop.handle == session and stats.confirmed == 1
    # nothing was posted for the interrupted message; the next one is answered in the same
    # session (stubllm matches "[slow]" anywhere in the conversation: the slow answer)
    assert replies(platform, room) == [SLOW]
    assert said(last, "user")[0] == "[slow] count"
    assert "interrupted by the user (reason: enough)" in said(last, "user")[-1]
    assert said(last, "user")[-1].endswith("[quick] next")
    print(
        f"\ninterrupt -> stubllm stream cancelled {1000 * (cancelled['perf'] - sent):.1f} ms,"
        f" stop took {1000 * stop.took:.1f} ms"
    )


async def test_stop_keeps_the_message_and_play_answers_it_in_the_same_session(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=SLOW_CHUNK_MS) as llm, shared_cli(llm) as cli:
            adapter = Observed(cli.config, cli=cli)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                slow = len(chat_requests(llm)) + 1  # stubllm numbers its requests from 1
                await llm.wait_for(
                    lambda e: e["req"] == slow and e["count"] >= 3, timeout=DEADLINE, event="chunk"
                )
                platform.send_control(agent_id, "stop", room_id=room, reason="not now")
                cancelled = await llm.wait_for(event="stream_cancelled", timeout=DEADLINE)
                [stop] = await adapter.settled(message)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert status(platform, message) == "processing"
                assert replies(platform, room) == []
                session = adapter.session(room)
                platform.send_control(agent_id, "play", room_id=room)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                assert adapter.session(room) == session
            first, replay = chat_requests(llm)
    assert cancelled["req"] == slow
    assert stop.outcome is StopOutcome.CONFIRMED
    assert replies(platform, room) == [SLOW]
    # the replay is the same message again, in the same session, told why it was cut off
    assert said(first, "user") == ["[slow] count"]
    assert said(replay, "user")[0] == "[slow] count"
    assert "stopped by the user (reason: not now)" in said(replay, "user")[-1]
    assert "answer the message again" in said(replay, "user")[-1]


async def test_a_stop_before_the_first_token_stops_the_model_call(platform: Platform) -> None:
    agent_id, _, user = seeded(platform)
    [room, other] = rooms_with_the_agent(platform, 2)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=0) as llm, shared_cli(llm) as cli:
            adapter = Observed(cli.config, cli=cli)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[late] take your time")
                started = await llm.wait_for(event="stream_started", timeout=DEADLINE)
                platform.send_control(agent_id, "interrupt", room_id=room)
                cancelled = await llm.wait_for(event="stream_cancelled", timeout=DEADLINE)
                [stop] = await adapter.settled(message)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                # the CLI serves the other rooms meanwhile, and afterwards
                quick = platform.post_message(other, user, "[quick] still there?")
                await platform.wait_until(lambda: status(platform, quick) == "processed")
    assert cancelled["req"] == started["req"] and cancelled["count"] == 0  # no token yet
    assert stop.outcome is StopOutcome.CONFIRMED
    assert replies(platform, room) == [] and replies(platform, other) == ["quick answer"]


# -- the CLI's process -------------------------------------------------------------------


async def test_a_cli_killed_mid_turn_fails_the_turn_and_the_next_turn_starts_it_again(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    _, room, user = seeded(platform)
    caplog.set_level(logging.INFO, logger="band_trio.adapters.copilot")
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=20) as llm:
            adapter = Observed(copilot_config(llm))  # owns its CLI, as `band-trio agent` does
            async with running_agent(platform, adapter):
                assert adapter.cli.starts == 1  # at the run's start, in the background
                first = platform.post_message(room, user, "[quick] remember me")
                await platform.wait_until(lambda: status(platform, first) == "processed")
                message = platform.post_message(room, user, "[slow] count")
                slow = len(chat_requests(llm)) + 1  # stubllm numbers its requests from 1
                await llm.wait_for(
                    lambda e: e["req"] == slow and e["count"] >= 3, timeout=DEADLINE, event="chunk"
                )
                killed = adapter.cli.pid
                assert killed is not None
                home, work = adapter.cli.home, adapter.cli.working_directory
                session = adapter.session(room)
                os.kill(killed, signal.SIGKILL)
                await platform.wait_until(lambda: status(platform, message) == "failed")
                [stop] = await adapter.settled(message)
                cancelled = await llm.wait_for(event="stream_cancelled", timeout=DEADLINE)
                after = platform.post_message(room, user, "[quick] are you back?")
                await platform.wait_until(lambda: status(platform, after) == "processed")
                restarted = adapter.cli.pid
                assert adapter.cli.starts == 2 and restarted not in (None, killed)
                assert adapter.session(room) == session  # resumed on the new CLI
                errors = [
                    entry.body or ""
                    for entry in platform.log()
                    if entry.kind == "rest" and (entry.path or "").endswith("/events")
                ]
            last = chat_requests(llm)[-1]
    assert restarted is not None
    assert group_members(killed) == [] and group_members(restarted) == []  # ended, reaped
    assert existing(home, work) == []  # the folders were made for the run, and removed
    assert cancelled["req"] == slow
    # the failed turn's error event carries the reason (runtime: the failure's label)
    assert any("CopilotGone: the Copilot CLI was killed by SIGKILL" in body for body in errors)
    assert stop.outcome is StopOutcome.CONFIRMED and "killed by SIGKILL" in stop.detail
    # The conversation survived the crash: the turn that ended before the kill is in the
    # resumed session's history. Whether the killed turn's own prompt is too depends on
    # whether the CLI had written it to disk before SIGKILL, so the answer to the next
    # message ("[slow]" scores higher than "[quick]" in stubllm) may be either.
    assert said(last, "user")[0] == "[quick] remember me"
    [kept, answer] = replies(platform, room)
    assert kept == "quick answer" and answer in (SLOW, "quick answer")
    assert ("[slow] count" in said(last, "user")) == (answer == SLOW)
    assert "starting the Copilot CLI again (the Copilot CLI was killed by SIGKILL" in caplog.text
    assert "resumed its Copilot session on the new CLI" in caplog.text


@pytest.mark.long(8)
@pytest.mark.rotated  # one a run, the day's: the stand-in CLI holds all three each run
@pytest.mark.parametrize("how", ["allow", "deny", "interrupt"])
async def test_the_real_cli_waits_for_the_rooms_answer_to_its_permission_request(
    platform: Platform, how: str
) -> None:
    """`permissions="ask"` with the real CLI: its `shell` request becomes a question;
    `allow` runs the tool, `deny` refuses it (the model is told), an interrupt during the
    question aborts the session (the request then answered `reject`)."""
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=0) as llm, shared_cli(llm) as cli:
            made = Path(cli.working_directory) / "made-by-the-model"
            config = CopilotConfig(**{**_fields(cli.config), "permissions": "ask"})
            adapter = Observed(config, cli=cli)
            async with running_agent(platform, adapter):
                asked = platform.post_message(room, user, "[shell] make a file")
                await platform.wait_until(
                    lambda: any(" reply with one of: " in r for r in replies(platform, room))
                )
                assert not made.exists()  # the CLI waits for the answer
                if how == "interrupt":
                    platform.send_control(agent_id, "interrupt", room_id=room)
                else:
                    handle = platform.store.agents[agent_id].handle
                    platform.post_message(room, user, f"@{handle} {how}", mentions=[agent_id])
                await platform.wait_until(lambda: status(platform, asked) == "processed")
                [stop] = await adapter.settled(asked) or [None]
            ran = made.exists()  # the folder goes with the CLI
            tools = [said(body, "tool") for body in chat_requests(llm)]
    question = next(r for r in replies(platform, room) if " reply with one of: " in r)
    assert "Copilot asks to run a shell command: `touch made-by-the-model`" in question
    assert ran == (how == "allow")
    if how == "interrupt":
        assert stop is not None and stop.outcome is StopOutcome.CONFIRMED
        assert not any(" reply with one of: " not in r and "withdrawn" not in r
                       for r in replies(platform, room))  # fmt: skip
    else:
        assert stop is None
        assert replies(platform, room)[-1] == "the shell tool answered"
        assert ("rejected" in tools[-1][0]) == (how == "deny")


@pytest.mark.long(8)
@pytest.mark.rotated  # one a run, the day's: the stand-in CLI holds both each run
@pytest.mark.parametrize("when", ["during-a-tool", "during-the-last-call"])
async def test_the_real_cli_answers_guidance_sent_while_it_works(
    platform: Platform, when: str
) -> None:
    """In a STEER room the real CLI gets guidance with `mode: "immediate"`: sent while its
    `shell` call waits for the room, it is in the next model call, after the tool's
    result; sent during the last model call, the CLI takes it up after that call, with a
    call of its own, and the turn's reply holds both answers. Either way it is the turn's:
    claimed once, processed with it, never answered on its own."""
    agent_id, room, user = seeded(platform)
    tool = when == "during-a-tool"
    handle = platform.store.agents[agent_id].handle
    with trio.fail_after(DEADLINE):
        delay = 0 if tool else GUIDED_CHUNK_MS
        async with shared_stubllm_peer(chunk_delay_ms=delay) as llm, shared_cli(llm) as cli:
            config = CopilotConfig(**{**_fields(cli.config), "permissions": "ask"})
            adapter = Steered(config, cli=cli)
            async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
                prompt = "[shell] make a file" if tool else "[slow] count"
                asked = platform.post_message(room, user, prompt)
                if tool:
                    await platform.wait_until(
                        lambda: any(" reply with one of: " in r for r in replies(platform, room))
                    )
                else:
                    await llm.wait_for(
                        lambda e: e["req"] == 1 and e["count"] >= 3,
                        timeout=DEADLINE,
                        event="chunk",
                    )
                hint = platform.post_message(
                    room, user, f"@{handle} and say hi", mentions=[agent_id]
                )
                await adapter.until_passed(1)  # the CLI accepted it in immediate mode
                if tool:
                    platform.post_message(room, user, f"@{handle} allow", mentions=[agent_id])
                await platform.wait_until(lambda: status(platform, asked) == "processed")
                await platform.wait_until(lambda: status(platform, hint) == "processed")
            requests = chat_requests(llm)
    guidance = f"Alice added, while you were working on this: @{handle} and say hi"
    answers = [r for r in replies(platform, room) if " reply with one of: " not in r]
    assert claims(platform, hint) == 1
    if tool:  # injected before the next model call, after the tool's result
        # (the CLI may call the model once more, when the shell's completion notice
        # comes after that call: its answer is the turn's too)
        first, second, *more = requests
        assert said(first, "user") == ["[shell] make a file"]
        assert said(second, "user")[:2] == ["[shell] make a file", guidance]
        assert said(second, "tool")
        assert answers == ["\n\n".join(["the shell tool answered"] * (1 + len(more)))]
    else:  # taken up after the last call, with a call of its own, in the same run
        first, second = requests
        assert said(second, "user") == ["[slow] count", guidance]
        assert answers == [f"{SLOW}\n\n{SLOW}"]
