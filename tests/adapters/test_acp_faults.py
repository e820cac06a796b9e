"""The ACP adapter against an SDK-built agent (tests/peers/acp_agent.py) that misbehaves on
purpose, or asks for what the policy decides: it dies mid-answer, writes what is not
ACP, ignores `session/cancel`, asks permissions, reads and writes files, cannot start,
speaks another version, wants authentication."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import trio

from band_trio import AdapterError, Policy, StopOutcome
from band_trio.adapters import AcpAdapter, AcpAgent, AcpError
from band_trio.platform import Platform
from band_trio.policy import UpstreamPolicy
from peers.acp_agents import AgentEvents, sdk_agent_config
from support import (
    background_agent,
    errors_posted,
    replies,
    rooms_with_the_agent,
    running_agent,
    seeded,
    status,
    wait_group_gone,
)

DEADLINE = 20
SETTLED = ("processed", "failed")


async def ask(platform: Platform, adapter: AcpAdapter, *texts: str) -> list[str | None]:
    """Post each text in turn, wait for its outcome; the statuses."""
    _, room, user = seeded(platform)
    done = []
    async with running_agent(platform, adapter):
        for text in texts:
            message = platform.post_message(room, user, text)
            await platform.wait_until(
                lambda m=message: status(platform, m) in ("processed", "failed")
            )
            done.append(status(platform, message))
    return done


async def test_an_agent_that_dies_mid_answer_fails_the_turn_and_the_next_one_loads_its_session(
    platform: Platform, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, room, user = seeded(platform)
    caplog.set_level(logging.INFO, logger="band_trio.adapters.acp")
    adapter = AcpAdapter(sdk_agent_config(tmp_path))
    events = AgentEvents(tmp_path)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            first = platform.post_message(room, user, "[quick] remember me")
            await platform.wait_until(lambda: status(platform, first) == "processed")
            session = adapter.session(room)
            died = adapter.agent.pid
            assert died is not None
            dying = platform.post_message(room, user, "[die]")
            await platform.wait_until(lambda: status(platform, dying) == "failed")
            await wait_group_gone(died, DEADLINE)
            after = platform.post_message(room, user, "[recall]")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            assert adapter.agent.starts == 2 and adapter.agent.pid not in (None, died)
            assert adapter.session(room) == session  # loaded on the new process
            [stop] = running.agent.remote_stops.recent
    [error] = errors_posted(platform, room)
    assert (
        error
        == "Could not answer: the ACP agent exited with status 3: the test agent dies on purpose."
    )
    assert stop.outcome is StopOutcome.CONFIRMED and "nothing runs" in stop.detail
    assert [e["session_id"] for e in events.all(event="load_session")] == [session]
    assert replies(platform, room) == ["quick answer", "[quick] remember me | [die] | [recall]"]
    assert "starting the ACP agent again (the ACP agent exited with status 3" in caplog.text


async def test_lines_that_are_not_acp_and_unknown_methods_never_end_the_connection(
    platform: Platform, tmp_path: Path
) -> None:
    _, room, _ = seeded(platform)
    adapter = AcpAdapter(sdk_agent_config(tmp_path))
    with trio.fail_after(DEADLINE):
        assert await ask(platform, adapter, "[garbage]", "[quick] and now?") == ["processed"] * 2
    assert replies(platform, room) == ["still here", "quick answer"]
    assert adapter.agent.starts == 1


async def test_a_prompt_that_ignores_session_cancel_is_reported_and_cancelled_again(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room, user = seeded(platform)
    events = AgentEvents(tmp_path)
    adapter = AcpAdapter(sdk_agent_config(tmp_path))
    policy = Policy(backend_stop_grace=0.2, upstream=UpstreamPolicy(resettle_grace=5.0))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            stubborn = platform.post_message(room, user, "[ignore]")
            await events.wait_for(event="prompt", text="[ignore]", timeout=DEADLINE)
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, stubborn) == "processed")
            after = platform.post_message(room, user, "[quick] and now?")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            [stop] = running.agent.remote_stops.recent
    assert (stop.outcome, stop.detail) == (
        StopOutcome.UNCONFIRMED,
        "session/cancel sent; the prompt was not answered in time",
    )
    assert len(events.all(event="cancel")) == 2  # once by the stop, once before the next
    [ignored, quick] = events.all(event="prompt_end")
    assert ignored["stop_reason"] == "end_turn" and quick["perf"] > ignored["perf"]
    assert replies(platform, room) == ["quick answer"]  # the late answer never got there


async def test_permission_requests_are_refused_unless_their_tool_kind_is_allowed(
    platform: Platform, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, room, _ = seeded(platform)
    caplog.set_level(logging.INFO, logger="band_trio.adapters.acp")
    adapter = AcpAdapter(sdk_agent_config(tmp_path, allow=frozenset({"execute"})))
    with trio.fail_after(DEADLINE):
        assert await ask(platform, adapter, "[ask execute]", "[ask edit]") == ["processed"] * 2
    assert replies(platform, room) == ["asked: yes", "asked: no"]  # allow_once, reject_once
    assert "granted the agent's execute request (a execute tool)" in caplog.text
    assert "denied the agent's edit request (a edit tool)" in caplog.text


async def test_files_are_offered_only_when_configured_and_only_inside_the_working_directory(
    platform: Platform, tmp_path: Path
) -> None:
    _, room, _ = seeded(platform)
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    (work / "escape").symlink_to(tmp_path / "secret.txt")
    events = AgentEvents(work)
    with trio.fail_after(DEADLINE):
        closed = AcpAdapter(sdk_agent_config(work))
        assert await ask(platform, closed, f"[read {work}/notes.txt]") == ["failed"]
        opened = AcpAdapter(sdk_agent_config(work, fs=frozenset({"read", "write"})))
        texts = [f"[read {work}/notes.txt]", f"[write {work}/made.txt]"]
        texts += [f"[read {tmp_path}/secret.txt]", f"[read {work}/escape]"]
        assert await ask(platform, opened, *texts) == ["processed"] * 2 + ["failed"] * 2
    first, second = events.all(event="initialize")
    assert first["fs"] == {"read": False, "write": False}
    assert second["fs"] == {"read": True, "write": True}
    assert replies(platform, room) == ["inside", "wrote"]
    assert (work / "made.txt").read_text() == "written"
    errors = errors_posted(platform, room)
    assert "band-trio does not offer fs/read_text_file" in errors[0]
    assert all("outside the working directory" in error for error in errors[1:])


@pytest.mark.parametrize(
    ("args", "overrides", "says"),
    [
        (("--start", "exit"), {}, "exited with status 3: boom: no licence for this machine"),
        (("--start", "old"), {}, "speaks ACP protocol 2; band-trio speaks 1"),
        (("--start", "garbage"), {"start_deadline": 0.5}, "did not answer within 0.5s"),
        (("--auth", "key"), {"auth_method": "login"}, "offers no auth method 'login'"),
        (
            (),
            {"command": ("/nonexistent/agent", "acp")},
            "cannot start the ACP agent '/nonexistent/agent': No such file or directory",
        ),
    ],
)
async def test_an_agent_that_cannot_be_used_fails_the_agents_start_with_the_reason(
    platform: Platform, tmp_path: Path, args: tuple[str, ...], overrides: dict[str, Any], says: str
) -> None:
    adapter = AcpAdapter(sdk_agent_config(tmp_path, *args, **overrides))
    with trio.fail_after(DEADLINE):
        async with background_agent(platform, adapter) as run:
            await run.finished.wait()
    assert isinstance(run.error, AdapterError)
    assert says in str(run.error)
    assert not run.started.is_set()  # no room was served
    assert adapter.agent.pid is None


async def test_authenticate_is_sent_when_the_agent_lists_methods_and_one_is_configured(
    platform: Platform, tmp_path: Path
) -> None:
    _, room, _ = seeded(platform)
    events = AgentEvents(tmp_path)
    with trio.fail_after(DEADLINE):
        without = AcpAdapter(sdk_agent_config(tmp_path, "--auth", "key"))
        assert await ask(platform, without, "[quick] hi") == ["failed"]
        signed = AcpAdapter(sdk_agent_config(tmp_path, "--auth", "key", auth_method="key"))
        assert await ask(platform, signed, "[quick] hi") == ["processed"]
    assert [e["method_id"] for e in events.all(event="authenticate")] == ["key"]
    assert "session/new answered error -32000" in errors_posted(platform, room)[0]
    assert replies(platform, room) == ["quick answer"]


async def test_outside_a_run_the_agent_is_not_started_and_says_why(tmp_path: Path) -> None:
    agent = AcpAgent(sdk_agent_config(tmp_path))
    with pytest.raises(AcpError, match=r"enter `adapter.lifespan\(\)`"):
        await agent.connection()
    assert agent.starts == 0
    assert not await trio.Path(tmp_path / "acp-agent.events.jsonl").exists()


async def test_a_permission_asked_after_session_cancel_is_answered_cancelled(
    platform: Platform, tmp_path: Path
) -> None:
    """The protocol: once the client cancelled a prompt, it answers the prompt's pending
    and later permission requests `cancelled` — whatever the policy would say."""
    agent_id, room, user = seeded(platform)
    events = AgentEvents(tmp_path)
    adapter = AcpAdapter(sdk_agent_config(tmp_path, allow=frozenset({"execute"})))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            message = platform.post_message(room, user, "[ask-late]")
            await events.wait_for(event="prompt", text="[ask-late]", timeout=DEADLINE)
            platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            [stop] = running.agent.remote_stops.recent
    [asked] = events.all(event="permission")
    assert asked["outcome"] == "cancelled"
    assert (stop.outcome, stop.detail) == (StopOutcome.CONFIRMED, "the prompt ended (cancelled)")
    assert replies(platform, room) == []


async def test_an_answer_past_its_limit_fails_the_turn_and_cancels_the_prompt(
    platform: Platform, tmp_path: Path
) -> None:
    _, room, user = seeded(platform)
    events = AgentEvents(tmp_path)
    adapter = AcpAdapter(sdk_agent_config(tmp_path))
    policy = Policy(upstream=UpstreamPolicy(max_answer_chars=20))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter, policy=policy) as running:
            message = platform.post_message(room, user, "[slow] go on and on")
            await platform.wait_until(lambda: status(platform, message) == "failed")
            [stop] = running.agent.remote_stops.recent
    [end] = events.all(event="prompt_end")
    assert end["stop_reason"] == "cancelled"  # stopped at the limit, not run to its end
    assert stop.outcome is StopOutcome.CONFIRMED
    assert errors_posted(platform, room) == [
        "Could not answer: the agent's answer passed 20 characters."
    ]


async def test_terminals_are_offered_only_when_configured_and_end_with_the_prompt(
    platform: Platform, tmp_path: Path
) -> None:
    """`terminal/*`: the command runs in the working directory (or a folder inside it),
    with the variables the agent names; one the agent kills at `session/cancel` is
    ended, its process group gone; a folder outside is refused."""
    agent_id, room, user = seeded(platform)
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    events = AgentEvents(work)
    with trio.fail_after(DEADLINE):
        closed = AcpAdapter(sdk_agent_config(work))
        assert await ask(platform, closed, "[run echo hi]") == ["failed"]
        opened = AcpAdapter(sdk_agent_config(work, terminal=True))
        texts = ['[run echo "$GREETING from $(pwd)"; exit 3]', f"[run pwd] [in {work}/sub]"]
        texts += [f"[run pwd] [in {tmp_path}]"]
        assert await ask(platform, opened, *texts) == ["processed", "processed", "failed"]
        [other] = rooms_with_the_agent(platform, 2)[1:]  # a room with no history
        async with running_agent(platform, AcpAdapter(sdk_agent_config(work, terminal=True))):
            long = platform.post_message(other, user, "[run-long]")
            await events.wait_for(event="prompt", text="[run-long]", timeout=DEADLINE)
            platform.send_control(agent_id, "interrupt", room_id=other)
            await platform.wait_until(lambda: status(platform, long) == "processed")
    first, second, _ = [e["terminal"] for e in events.all(event="initialize")]
    assert (first, second) == (False, True)
    assert replies(platform, room) == [
        f"exit 3 None: hello from {work}",
        f"exit 0 None: {work}/sub",
    ]
    [killed] = events.all(event="terminal_killed")
    assert killed["signal"] == "SIGTERM"
    errors = errors_posted(platform, room)
    assert "band-trio does not offer terminal/create" in errors[0]
    assert "outside the working directory" in errors[1]
