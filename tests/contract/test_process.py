"""`run_command` on real `sh` process trees: what an abort ends, and what a normal exit leaves.

Every tree's pids are written by the script itself to a file, and every check
of "gone" reads /proc: a process counts as gone once it is absent or a zombie
(PID 1 here reaps orphaned zombies seconds late). The turn is built directly
with a fake port; the abort is what the runtime does: `control.aborted(...)`,
then cancel the scope around the call.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from band_trio.contract import (
    CommandResult,
    Message,
    Participant,
    StopOutcome,
    Turn,
    TurnControl,
    run_command,
)
from support import pid_pipe

DEADLINE = 10
GRACE = 0.3


class NoPlatform:
    """A `TurnPort` that is never called: these turns only run commands."""

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        raise AssertionError("not used")

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        raise AssertionError("not used")

    async def history(self) -> list[Message]:
        raise AssertionError("not used")

    async def participants(self) -> list[Participant]:
        raise AssertionError("not used")


def new_turn(kill_grace: float = GRACE, stop_grace: float = 5.0) -> tuple[Turn, TurnControl]:
    message = Message(id="m1", room_id="r1", content="run", sender_id="u1", sender_type="User")
    control = TurnControl("r1", "m1", stop_grace=stop_grace, kill_grace=kill_grace)
    return Turn(message, NoPlatform(), control=control), control


def stat_fields(pid: int) -> list[bytes] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rfind(b")") + 2 :].split()


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def live_members(pgid: int) -> list[int]:
    """Every live process of group `pgid`, read from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat_fields(int(name))
            if fields and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                found.append(int(name))
    return found


def read_pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


async def abort_when(turn: Turn, control: TurnControl, argv: list[str], ready: Any) -> None:
    """Run `argv` in `turn`, and abort the turn as the runtime does once `ready()` returns."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_command, turn, argv)
            await ready()
            control.aborted("interrupt", None)
            scope.cancel()
    assert scope.cancelled_caught


def tree(body: str, pids: Path) -> list[str]:
    """`sh -c` a script that records its own pid and its children's, then waits."""
    return ["sh", "-c", f'{body}\necho $$ >> "$0"\nwait', str(pids)]


async def test_stdin_reaches_the_command_and_its_output_comes_back() -> None:
    turn, _ = new_turn()
    with trio.fail_after(DEADLINE):
        result = await run_command(turn, ["sh", "-c", "tr a-z A-Z; echo oops >&2"], input=b"hi\n")
    assert result == CommandResult(returncode=0, stdout=b"HI\n", stderr=b"oops\n")
    assert not result.truncated
    assert turn.remote_stops == ()  # it ended on its own: nothing to stop


async def test_a_nonzero_exit_is_a_result_not_an_error() -> None:
    turn, _ = new_turn()
    with trio.fail_after(DEADLINE):
        result = await run_command(turn, ["sh", "-c", "exit 3"])
    assert result.returncode == 3


async def test_input_the_command_never_reads_is_not_an_error() -> None:
    turn, _ = new_turn()
    with trio.fail_after(DEADLINE):
        result = await run_command(turn, ["true"], input=b"x" * (4 * 1024 * 1024))
    assert result.returncode == 0


async def test_output_is_capped_and_the_cut_is_counted() -> None:
    turn, _ = new_turn()
    with trio.fail_after(DEADLINE):
        small = await run_command(
            turn,
            ["sh", "-c", "head -c 300000 /dev/zero; head -c 10 /dev/zero >&2"],
            output_limit=1000,
        )
        default = await run_command(turn, ["head", "-c", str(3 * 1024 * 1024), "/dev/zero"])
    assert (len(small.stdout), small.stdout_dropped) == (1000, 299_000)
    assert (small.stderr, small.stderr_dropped) == (b"\0" * 10, 0)
    assert small.truncated and small.returncode == 0  # read to the end: never blocked
    assert (len(default.stdout), default.stdout_dropped) == (1024 * 1024, 2 * 1024 * 1024)


async def test_a_missing_executable_is_a_clear_error(tmp_path: Path) -> None:
    turn, _ = new_turn()
    with trio.fail_after(DEADLINE):
        with pytest.raises(FileNotFoundError, match="command not found on PATH: 'no-such-cmd'"):
            await run_command(turn, ["no-such-cmd", "arg"])
        with pytest.raises(FileNotFoundError, match="command file not found: '/nope/cmd'"):
            await run_command(turn, ["/nope/cmd"])
        with pytest.raises(FileNotFoundError, match="working directory not found"):
            await run_command(turn, ["true"], cwd=str(tmp_path / "gone"))
        script = tmp_path / "script.sh"
        script.write_text("#!/bin/sh\necho hi\n")  # not executable
        with pytest.raises(PermissionError, match="command is not executable"):
            await run_command(turn, [str(script)])
        with pytest.raises(ValueError, match="needs a command"):
            await run_command(turn, [])
    assert turn.remote_stops == ()  # nothing started, nothing to stop


async def test_a_cancel_ends_every_process_of_the_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    turn, control = new_turn(kill_grace=5.0)  # SIGTERM does it: the grace is never reached
    argv = tree('sleep 30 & echo $! >> "$0"\nsleep 30 & echo $! >> "$0"', pids)
    written: list[int] = []

    with trio.fail_after(DEADLINE):
        async with pid_pipe(pids) as pipe:

            async def ready() -> None:
                written.extend(await pipe.wait(3))

            await abort_when(turn, control, argv, ready)
    leader = written[-1]
    assert all(alive(pid) is False for pid in written), [(p, stat_fields(p)) for p in written]
    assert live_members(leader) == []
    [stop] = turn.remote_stops
    assert (stop.outcome, stop.handle, stop.name) == (
        StopOutcome.CONFIRMED,
        str(leader),
        "process group",
    )
    assert stop.detail.startswith("ended on SIGTERM"), stop.detail


async def test_a_tree_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    turn, control = new_turn(kill_grace=GRACE)
    # `trap '' TERM` is inherited: the grandchildren ignore SIGTERM too
    argv = tree("trap '' TERM\n" + 'sleep 30 & echo $! >> "$0"\nsleep 30 & echo $! >> "$0"', pids)
    written: list[int] = []

    with trio.fail_after(DEADLINE):
        async with pid_pipe(pids) as pipe:

            async def ready() -> None:
                written.extend(await pipe.wait(3))

            await abort_when(turn, control, argv, ready)
    assert not any(alive(pid) for pid in written)
    assert live_members(written[-1]) == []
    [stop] = turn.remote_stops
    assert stop.outcome is StopOutcome.CONFIRMED
    assert stop.detail == "SIGKILLed: SIGTERM ignored for 0.30 s"
    assert stop.took >= GRACE  # SIGKILL waited for the grace


async def test_the_kill_grace_holds_even_when_longer_than_the_backend_stop_grace(
    tmp_path: Path,
) -> None:
    """A process group's stop has a deadline of its own (its kill grace and the
    reaping), so a short `backend_stop_grace` for network peers cannot cut it."""
    pids = tmp_path / "pids"
    turn, control = new_turn(kill_grace=GRACE, stop_grace=GRACE / 3)
    argv = tree("trap '' TERM\n" + 'sleep 30 & echo $! >> "$0"', pids)
    written: list[int] = []

    with trio.fail_after(DEADLINE):
        async with pid_pipe(pids) as pipe:

            async def ready() -> None:
                written.extend(await pipe.wait(2))

            await abort_when(turn, control, argv, ready)
    assert not any(alive(pid) for pid in written)
    [stop] = turn.remote_stops
    assert stop.detail == "SIGKILLed: SIGTERM ignored for 0.30 s"


async def test_the_stop_is_sent_once_however_often_the_turn_is_cancelled(tmp_path: Path) -> None:
    pids, terms = tmp_path / "pids", tmp_path / "terms"
    turn, control = new_turn(kill_grace=GRACE)
    # the leader counts its SIGTERMs and lives on (its `sleep` children die of theirs)
    script = f'trap "echo TERM >> {terms}" TERM\necho $$ > "$0"\nwhile :; do sleep 5 & wait; done'
    written: list[int] = []
    with trio.fail_after(DEADLINE), trio.CancelScope() as scope:
        async with pid_pipe(pids) as pipe, trio.open_nursery() as nursery:
            nursery.start_soon(run_command, turn, ["sh", "-c", script, str(pids)])
            written.extend(await pipe.wait(1))
            control.aborted("interrupt", None)
            scope.cancel()
            control.aborted("stop", None)  # a second signal changes nothing
            scope.cancel()
    assert terms.read_text().split() == ["TERM"]
    assert len(turn.remote_stops) == 1 and live_members(written[0]) == []
    assert turn.remote_stops[0].detail.startswith("SIGKILLed")


async def test_a_normal_exit_leaves_no_grandchild_behind(tmp_path: Path) -> None:
    turn, _ = new_turn()
    # one grandchild keeps the output pipe, one left it and ignores SIGTERM
    script = (
        'sleep 30 & echo $!\n(trap "" TERM; exec sleep 30) >/dev/null 2>&1 </dev/null &\n'
        "echo $!\necho $$"
    )
    with trio.fail_after(DEADLINE):
        result = await run_command(turn, ["sh", "-c", script])
    *children, leader = [int(pid) for pid in result.stdout.split()]
    assert result.returncode == 0
    assert not any(alive(pid) for pid in [*children, leader])
    assert live_members(leader) == []
    assert turn.remote_stops == ()  # cleaning up after an exit is not a stop


async def test_a_turn_aborted_before_the_call_starts_nothing(tmp_path: Path) -> None:
    turn, control = new_turn()
    ran = tmp_path / "ran"
    with trio.fail_after(DEADLINE), trio.CancelScope() as scope:
        control.aborted("interrupt", None)
        scope.cancel()  # already cancelled when the call begins
        await run_command(turn, ["sh", "-c", f"touch {ran}; sleep 30"])
    assert scope.cancelled_caught
    assert not ran.exists() and turn.remote_stops == ()


async def test_output_held_by_a_process_that_left_the_group_is_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    turn, _ = new_turn(kill_grace=GRACE)
    pids = tmp_path / "pids"
    script = (  # the leader exits once its grandchild is in a session of its own
        f"setsid sh -c 'echo $$ > {pids}; exec sleep 30' &\n"
        f"while [ ! -s {pids} ]; do sleep 0.01; done\necho started"
    )
    try:
        with trio.fail_after(DEADLINE), caplog.at_level(logging.WARNING, "band_trio.process"):
            result = await run_command(turn, ["sh", "-c", script])
        [escaped] = read_pids(pids)  # written before the leader exited
        assert result.stdout == b"started\n" and result.returncode == 0
        assert "outlived the group" in caplog.text
    finally:  # a new session is out of the group's reach: clean up after the limit
        for pid in read_pids(pids):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert escaped
