"""The command adapter over real loopback sockets: real `sh` trees, real signals.

One script (`ANSWER`) plays every kind of command, chosen by the message's
text: it answers, fails, hangs with grandchildren (the first time it sees a
message), or hangs ignoring SIGTERM. A hanging run writes its pids to a file;
"gone" is read from /proc (absent, or a zombie: PID 1 here reaps orphaned zombies
seconds late).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import trio

from band_trio import ConfigurationError, Policy, StopOutcome
from band_trio.adapters import CommandAdapter, command
from band_trio.platform import Platform
from support import pid_pipe, replies, running_agent, status

DEADLINE = 10

ANSWER = r"""
dir="$1"
input=$(cat)
case "$input" in
  hang*)
    if [ ! -e "$dir/$BAND_MESSAGE_ID.ran" ]; then
      : > "$dir/$BAND_MESSAGE_ID.ran"
      sleep 30 & echo $! >> "$dir/pids"
      sleep 30 & echo $! >> "$dir/pids"
      echo $$ >> "$dir/pids"
      wait
    fi
    echo "second run: $input" ;;
  stubborn*)
    trap '' TERM
    sleep 30 & echo $! >> "$dir/pids"
    echo $$ >> "$dir/pids"
    wait ;;
  fail*)
    echo "first line" >&2
    echo "bad input" >&2
    exit 4 ;;
  quiet*) ;;
  *)
    printf '  you said: %s (%s in %s, %s)  \n' \
      "$input" "$BAND_SENDER_ID" "$BAND_ROOM_ID" "$BAND_MESSAGE_ID" ;;
esac
"""


@pytest.fixture
def answer(tmp_path: Path) -> CommandAdapter:
    script = tmp_path / "answer.sh"
    script.write_text(ANSWER)
    return CommandAdapter(["sh", str(script), str(tmp_path)])


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


async def test_the_command_answers_with_its_stdout(
    platform: Platform, answer: CommandAdapter
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, answer):
            said = platform.post_message(info.room_id, info.user_id, "hello")
            await platform.wait_until(lambda: status(platform, said) == "processed")
            quiet = platform.post_message(info.room_id, info.user_id, "quiet please")
            await platform.wait_until(lambda: status(platform, quiet) == "processed")
    assert replies(platform, info.room_id) == [
        f"you said: hello ({info.user_id} in {info.room_id}, {said})",  # stripped
        "(the command printed nothing)",
    ]


async def test_a_nonzero_exit_fails_the_message(
    platform: Platform, answer: CommandAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    with trio.fail_after(DEADLINE), caplog.at_level(logging.WARNING, "band_trio.runtime"):
        async with running_agent(platform, answer):
            bad = platform.post_message(info.room_id, info.user_id, "fail now")
            await platform.wait_until(lambda: status(platform, bad) == "failed")
    assert replies(platform, info.room_id) == []
    assert "CommandFailedError: command exited with status 4: bad input" in caplog.text


async def test_an_interrupt_ends_the_whole_tree_and_consumes_the_message(
    platform: Platform, answer: CommandAdapter, tmp_path: Path
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, answer) as running, pid_pipe(tmp_path / "pids") as pipe:
            message = platform.post_message(info.room_id, info.user_id, "hang in there")
            pids = await pipe.wait(3)
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            await running.agent.wait_until(lambda: running.agent.remote_stops.sent == 1)
            assert not any(alive(pid) for pid in pids)
            [stop] = running.agent.remote_stops.recent
    assert replies(platform, info.room_id) == []  # consumed, never answered
    assert (stop.outcome, stop.handle, stop.message_id) == (
        StopOutcome.CONFIRMED,
        str(pids[-1]),
        message,
    )
    assert stop.detail.startswith("ended on SIGTERM")


async def test_stop_ends_the_tree_keeps_the_message_and_play_answers_it(
    platform: Platform, answer: CommandAdapter, tmp_path: Path
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, answer) as running, pid_pipe(tmp_path / "pids") as pipe:
            message = platform.post_message(info.room_id, info.user_id, "hang on")
            pids = await pipe.wait(3)
            platform.send_control(info.agent_id, "stop", room_id=info.room_id)
            await running.agent.wait_until(lambda: running.agent.remote_stops.sent == 1)
            assert not any(alive(pid) for pid in pids)
            assert status(platform, message) == "processing"  # kept for later
            assert replies(platform, info.room_id) == []
            platform.send_control(info.agent_id, "play", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
    assert replies(platform, info.room_id) == ["second run: hang on"]


async def test_a_command_ignoring_sigterm_is_killed_after_the_policy_grace(
    platform: Platform, answer: CommandAdapter, tmp_path: Path
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    policy = Policy(subprocess_kill_grace=0.3)
    with trio.fail_after(DEADLINE):
        async with (
            running_agent(platform, answer, policy=policy) as running,
            pid_pipe(tmp_path / "pids") as pipe,
        ):
            message = platform.post_message(info.room_id, info.user_id, "stubborn")
            pids = await pipe.wait(2)
            platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            await running.agent.wait_until(lambda: running.agent.remote_stops.sent == 1)
            assert not any(alive(pid) for pid in pids)
            [stop] = running.agent.remote_stops.recent
    assert stop.outcome is StopOutcome.CONFIRMED
    assert stop.detail == "SIGKILLed: SIGTERM ignored for 0.30 s"  # the policy's grace
    assert replies(platform, info.room_id) == []


def test_the_factory_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BAND_COMMAND", raising=False)
    monkeypatch.delenv("BAND_COMMAND_CWD", raising=False)
    with pytest.raises(ConfigurationError, match="BAND_COMMAND is not set"):
        command()
    monkeypatch.setenv("BAND_COMMAND", "   ")
    with pytest.raises(ConfigurationError, match="BAND_COMMAND is not set"):
        command()
    monkeypatch.setenv("BAND_COMMAND", "echo 'unclosed")
    with pytest.raises(ConfigurationError, match="BAND_COMMAND cannot be split"):
        command()
    monkeypatch.setenv("BAND_COMMAND", "no-such-command --flag")
    with pytest.raises(ConfigurationError, match="'no-such-command' is not found on PATH"):
        command()
    monkeypatch.setenv("BAND_COMMAND", "./tool.sh")
    with pytest.raises(ConfigurationError, match=r"'\./tool\.sh' is not an executable file"):
        command()
    monkeypatch.setenv("BAND_COMMAND", "sh -c 'tr a-z A-Z'")
    assert command().argv == ("sh", "-c", "tr a-z A-Z")
    monkeypatch.setenv("BAND_COMMAND_CWD", str(tmp_path / "missing"))
    with pytest.raises(ConfigurationError, match="BAND_COMMAND_CWD is not a directory"):
        command()
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/bin/sh\necho hi\n")
    os.chmod(tool, 0o755)
    monkeypatch.setenv("BAND_COMMAND_CWD", str(tmp_path))
    monkeypatch.setenv("BAND_COMMAND", "./tool.sh")  # relative to BAND_COMMAND_CWD
    adapter = command()
    assert (adapter.argv, adapter.cwd) == (("./tool.sh",), str(tmp_path))
