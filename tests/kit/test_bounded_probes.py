"""A stuck adapter is a failed probe, named, within the probe's deadline — from the
library, the pytest fixture and the command (issue 21, item 3).

An adapter that never lets the cancel in (a shielded wait; a blocking call in
`trio.to_thread.run_sync` without `abandon_on_cancel`) keeps its agent's `run()`
alive for ever. Before, the kit waited for it after its bounded `agent.stop()`,
and `band-trio conformance`, the pytest fixture and an outer `move_on_after`
hung with it. Now each probe runs in a trio run of its own, abandoned past its
deadlines.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from broken import BlockingThread, ShieldedForever

from band_trio import Adapter, Policy
from band_trio.testing import ProbeResult, Subject, run_probes, select_probes, swallowed_cancel
from band_trio.testing._bounded import run_bounded, run_here
from support import conformance

HERE = Path(__file__).resolve().parent
FAST = Policy(cleanup_grace=0.2, backend_stop_grace=0.3, shutdown_grace=0.3)


@pytest.mark.parametrize("stuck", [ShieldedForever, BlockingThread])
async def test_a_stuck_adapter_fails_its_probe_within_the_deadline(
    stuck: Callable[[threading.Event], Adapter],
) -> None:
    release = threading.Event()
    subject = Subject(lambda: stuck(release), deadline=1, probe_deadline=60, policy=FAST)
    try:
        with trio.fail_after(30):  # before: never returned (a shielded wait in its own run)
            [result] = await run_probes(subject, [swallowed_cancel])
    finally:
        release.set()  # the abandoned run may end now
    assert (result.name, result.outcome) == ("a swallowed cancellation is reported", "failed")
    assert "the adapter ignored the stop and is still at work" in result.observed
    assert "the agent did not stop within 1s" in result.observed
    assert "never lets the cancel in" in result.observed


async def test_a_probe_that_never_reaches_a_verdict_fails_at_the_probe_deadline(
    autojump_clock: object,
) -> None:
    release = threading.Event()

    async def hangs(subject: Subject) -> ProbeResult:
        with trio.CancelScope(shield=True):
            while not release.is_set():
                await trio.sleep(0.05)
        return ProbeResult("hangs", "passed", "")

    subject = Subject(Adapter, probe_deadline=3)
    try:
        with trio.fail_after(10):
            result = await run_bounded("hangs", hangs, subject)
    finally:
        release.set()
    assert result.outcome == "failed"
    assert "did not end within 3s" in result.observed


async def test_a_subject_that_is_not_isolated_runs_its_probes_in_the_callers_run() -> None:
    here = trio.lowlevel.current_trio_token()
    seen = []

    async def where(subject: Subject) -> ProbeResult:
        seen.append(trio.lowlevel.current_trio_token())
        return ProbeResult("where", "passed", "")

    await run_probes(Subject(Adapter, isolated=False), [where])
    await run_probes(Subject(Adapter), [where])
    assert seen[0] is here  # a process the caller serves is usable by its probes
    assert seen[1] is not here


async def test_a_probe_in_the_callers_run_still_fails_at_its_deadline(
    autojump_clock: object,
) -> None:
    async def hangs(subject: Subject) -> ProbeResult:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def breaks(subject: Subject) -> ProbeResult:
        raise RuntimeError("boom")

    subject = Subject(Adapter, probe_deadline=3, isolated=False)
    with trio.fail_after(10):
        late, broke = await run_probes(subject, [hangs, breaks])
    assert late.outcome == "failed"
    assert "did not end within 3s" in late.observed
    assert "not isolated" in late.observed
    assert broke.outcome == "failed"
    assert "RuntimeError('boom')" in broke.observed
    assert (late.name, broke.name) == ("hangs", "breaks")
    with trio.fail_after(10):  # the same helper, called directly
        assert (await run_here("x", hangs, subject)).outcome == "failed"


def test_probes_are_chosen_by_part_of_their_name() -> None:
    assert select_probes(["SWALLOWED"]) == [swallowed_cancel]
    with pytest.raises(ValueError, match="no probe is named like 'nope'"):
        select_probes(["nope"])


async def test_the_command_fails_a_stuck_adapter_naming_its_probe() -> None:
    with trio.fail_after(60):  # before: hung for ever
        done = await conformance(
            "broken:ShieldedForever", "--probe", "interrupt mid-work", "--deadline", "2", cwd=HERE
        )
    out = done.stdout.decode()
    assert done.returncode == 1, (out, done.stderr.decode())
    assert "| interrupt mid-work | failed |" in out
    assert "the adapter's turn did not end after interrupt" in out
    assert "never lets the cancel in" in out


STUCK_SUITE = """
import trio
from band_trio import Adapter, Policy, Turn

class Stuck(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        await trio.to_thread.run_sync(__import__("threading").Event().wait)  # no abandon

async def test_my_adapter(band_conformance):
    await band_conformance(
        Stuck,
        probes=["swallowed"],
        deadline=2,
        policy=Policy(cleanup_grace=0.2, backend_stop_grace=0.3, shutdown_grace=0.3),
    )
"""


@pytest.mark.long(20)
def test_the_fixture_fails_a_stuck_adapter_naming_its_probe(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(test_mine=STUCK_SUITE)
    result = pytester.runpytest_subprocess("-q", "-p", "trio", timeout=60)  # before: hung
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*the adapter failed the conformance kit*", "*a swallowed cancellation is reported*"]
    )


async def test_a_ctrl_c_stops_the_command_at_once_even_with_a_stuck_probe() -> None:
    argv = [sys.executable, "-m", "band_trio", "conformance", "broken:ShieldedForever"]
    process = await trio.lowlevel.open_process(
        [*argv, "--probe", "swallowed"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=HERE
    )
    try:
        with trio.fail_after(30):
            assert process.stdout is not None
            said = b""
            while b"probes" not in said:  # the first line: the probes are under way
                said += await process.stdout.receive_some()
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 130
            assert process.stderr is not None
            err = b""
            while chunk := await process.stderr.receive_some():
                err += chunk
            assert err.decode().strip().splitlines()[-1] == "band-trio: interrupted"
            assert b"Traceback" not in err
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
