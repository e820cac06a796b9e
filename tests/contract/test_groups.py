"""The process groups band-trio leads are noted while their leader is unreaped, so the
commands' forced exit (`os._exit`, past the hard-stop deadline) can SIGKILL them first
(tests/cli/test_hard_stop.py, tests/runs/test_cli.py hold that end to end). Each place
that starts a group in a session of its own is held here: `run_command` and the
Copilot CLI's process."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from band_trio.adapters._stdio_process import spawn
from band_trio.contract import Message, Turn, TurnControl, groups, run_command
from band_trio.contract.groups import children_leading_groups, kill_live_groups
from support import NoPlatform, pid_pipe

DEADLINE = 30


@pytest.fixture(autouse=True)
def only_this_tests_groups(monkeypatch: pytest.MonkeyPatch) -> set[int]:
    """A set of this test's own: `kill_live_groups` must not reach the groups of
    anything else the test process runs (a session's peers)."""
    live: set[int] = set()
    monkeypatch.setattr(groups, "_LIVE", live)
    # nor the other children of the test process that lead a group (its peers): the
    # scan is tested on its own below
    monkeypatch.setattr(groups, "children_leading_groups", set)
    return live


async def test_a_commands_group_is_noted_while_it_runs_and_killed_at_a_forced_exit(
    tmp_path: Path, only_this_tests_groups: set[int]
) -> None:
    live = only_this_tests_groups
    message = Message(id="m1", room_id="r1", content="run", sender_id="u1", sender_type="User")
    control = TurnControl("r1", "m1", stop_grace=5, kill_grace=1)
    turn = Turn(message, NoPlatform(), control=control)
    results = []
    with trio.fail_after(DEADLINE):
        async with pid_pipe(tmp_path / "pids") as pids, trio.open_nursery() as nursery:

            async def run() -> None:
                # its stdin is fed once the group is noted: reading to its end first,
                # the pid can never reach the test before the note (a loaded machine
                # showed that order: Popen returns to the task after the child runs)
                script = f'cat > /dev/null; echo $$ >> "{pids.path}"; exec sleep 600'
                results.append(await run_command(turn, ["sh", "-c", script]))

            nursery.start_soon(run)
            [pgid] = await pids.wait(1)
            assert pgid in live
            assert kill_live_groups() == 1
    [result] = results  # the group was SIGKILLed: the command ended
    assert result.returncode == -signal.SIGKILL
    assert pgid not in live  # reaped: forgotten, its id may be reused


async def test_the_copilot_clis_group_is_noted_until_it_is_reaped(
    only_this_tests_groups: set[int],
) -> None:
    live = only_this_tests_groups
    cli = await spawn(["sh", "-c", "exec sleep 600"], cwd=".", env={}, stderr_tail=100, what="sh")
    with trio.fail_after(DEADLINE):
        assert cli.pid in live
        kill_live_groups()
        await cli.exited()
        assert cli.describe_exit() == "was killed by SIGKILL"
        await cli.stop(kill_grace=1)
    assert cli.reaped and cli.pid not in live


async def test_a_child_leading_its_own_group_is_found_even_if_never_noted() -> None:
    """The exit's second net: a command started but not noted yet (its task had not
    resumed from the spawn's thread) is found as a child leading its own group."""
    process = await trio.lowlevel.open_process(["sleep", "600"], start_new_session=True)
    try:
        assert process.pid in children_leading_groups()
    finally:
        process.kill()
        await process.wait()
    assert process.pid not in children_leading_groups()  # reaped: no longer our child
