"""`band-trio bench --quick` as the test command runs it: both runtimes, to the end, clean.

The run is the quick preset made smaller (10 rooms, 3 trials): the harness, each
scenario and both runtimes side by side are what it proves, in about 25 s instead
of 50-90 s; the figures at full size are docs/benchmarks.md's.

This asserts completion, not speed: every trial observed what it waited for
(zero failures), every agent came back to its start-up task count after each
scenario (zero leaked tasks), the JSON has the documented fields, the plot is
a PNG, and no process the run started is left once it exits.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import trio

REQUIRED = {
    "runtime", "scenario", "rooms", "metric", "n", "failures", "p50_ms", "p90_ms", "p99_ms",
    "max_ms", "floor_p50_ms", "leaked_tasks",
}  # fmt: skip


def _processes_marked(marker: str) -> list[int]:
    """Live processes whose environment carries `BAND_BENCH_RUN=marker`."""
    found = []
    needle = f"BAND_BENCH_RUN={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry))
    return found


@pytest.mark.long(30)
@pytest.mark.timeout(170)
async def test_quick_bench_with_the_band_sdk_peer_completes_clean(tmp_path: Path) -> None:
    out, plot = tmp_path / "bench.json", tmp_path / "bench.png"
    marker = uuid.uuid4().hex
    env = {**os.environ, "BAND_BENCH_RUN": marker}
    argv = [sys.executable, "-m", "band_trio", "bench", "--quick", "--peer", "band-sdk"]
    argv += ["--rooms", "3", "--trials", "3"]  # one tier: the load (2 busy rooms) and the peers
    argv += ["--json", str(out), "--plot", str(plot), "--no-progress"]
    with trio.fail_after(150):
        done = await trio.run_process(
            argv, env=env, capture_stdout=True, capture_stderr=True, check=False
        )
    stderr = done.stderr.decode(errors="replace")
    assert "Traceback" not in stderr, stderr[-3000:]
    report = json.loads(out.read_text())
    rows = report["results"]
    failing = [
        f"{r['runtime']} {r['scenario']} {r['rooms']} {r['metric']}: {r['notes']}"
        for r in rows
        if r["failures"]
    ]
    assert done.returncode == 0, "\n".join([stderr[-2000:], *failing, *report.get("notes", [])])
    assert rows and all(set(row) >= REQUIRED for row in rows)
    assert {row["runtime"] for row in rows} == {"floor", "band-trio", "band-sdk"}
    failed = [
        (r["runtime"], r["scenario"], r["rooms"], r["metric"], r["notes"])
        for r in rows
        if r["failures"]
    ]
    assert failed == []
    leaked = [(r["runtime"], r["scenario"], r["rooms"]) for r in rows if r["leaked_tasks"]]
    assert leaked == []
    assert report["log_entries_lost"] == 0
    scenarios = {(r["runtime"], r["scenario"], r["rooms"]) for r in rows}
    for runtime in ("band-trio", "band-sdk"):
        for scenario in ("interrupt", "agent interrupt", "stop", "play", "start-up", "teardown"):
            assert (runtime, scenario, 3) in scenarios
        assert (runtime, "remote stop: command", 3) in scenarios
    assert ("band-trio", "remote stop: anthropic", 3) in scenarios  # the SDK, no bridge
    # leak checks ran for every signal scenario of both runtimes
    checked = {(r["runtime"], r["scenario"]) for r in rows if r["leaked_tasks"] is not None}
    assert {
        ("band-trio", "stop"),
        ("band-sdk", "play"),
        ("band-trio", "agent interrupt"),
    } <= checked
    assert all(r["n"] > 0 for r in rows)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| band-trio | interrupt | 3 | signal → adapter cancelled |" in done.stdout.decode()
    assert _processes_marked(marker) == []


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--rooms", "1,abc"], "--rooms takes room counts"),
        (["--rooms", "0"], "--rooms takes room counts"),
        (["--idle-rooms", "200000"], "--idle-rooms takes room counts"),
        (["--trials", "0"], "--trials takes 1..10000"),
        (["--json", "/nonexistent-folder/out.json"], "--json: cannot write"),
        (["--plot", "/nonexistent-folder/out.png"], "--plot: cannot write"),
        (["--scale"], "--quick and --scale are two presets"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(flags: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "band_trio", "bench", "--quick", *flags],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


async def _gone(pids: list[int]) -> None:
    """Wait (caller's deadline) until none of `pids` is alive: a pidfd per process."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            await trio.lowlevel.wait_readable(fd)
        finally:
            os.close(fd)


@pytest.mark.long(9)
@pytest.mark.timeout(120)
async def test_kill_9_mid_run_leaves_no_process_behind() -> None:
    """The driver killed outright cannot stop anything: each agent and peer sees the
    end of file on the stdin the driver held, and exits by itself."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "BAND_BENCH_RUN": marker}
    argv = [sys.executable, "-m", "band_trio", "bench", "--quick", "--peer", "band-sdk"]
    argv += ["--rooms", "1", "--trials", "2"]  # the phase it waits for comes sooner
    with trio.fail_after(100):
        process = await trio.lowlevel.open_process(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert process.stderr is not None
        seen = b""
        async for chunk in process.stderr:
            seen += chunk
            if b"remote stop: stubllm: starting the peer" in seen:  # agents and a peer up
                break
        running = [pid for pid in _processes_marked(marker) if pid != process.pid]
        assert len(running) >= 2  # both agents (and the stubllm peer once it is up)
        process.kill()
        await process.wait()
        await _gone(running)
        while left := _processes_marked(marker):  # one started as the driver died
            await _gone(left)
    assert _processes_marked(marker) == []


@pytest.mark.long(9)
@pytest.mark.timeout(120)
async def test_sigterm_mid_run_stops_every_process_it_started(tmp_path: Path) -> None:
    """Once both agents are up and trials run, SIGTERM ends the bench with 130 and a
    line, and none of its agents (or peers) is left running."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "BAND_BENCH_RUN": marker}
    argv = [sys.executable, "-m", "band_trio", "bench", "--quick", "--peer", "band-sdk"]
    argv += ["--rooms", "1", "--trials", "2"]  # the phase it waits for comes sooner
    with trio.fail_after(100):
        async with trio.open_nursery() as nursery:
            process = await trio.lowlevel.open_process(
                argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            nursery.start_soon(process.wait)
            assert process.stderr is not None
            seen = b""
            async for chunk in process.stderr:  # the progress lines, as they come
                seen += chunk
                if b"interrupt, 1 rooms: settling" in seen:  # both agents are up
                    break
            assert len(_processes_marked(marker)) >= 3  # the bench and both agents
            process.send_signal(signal.SIGTERM)
            async for chunk in process.stderr:
                seen += chunk
            await process.wait()
    assert process.returncode == 130, seen.decode(errors="replace")[-2000:]
    assert b"interrupted" in seen and b"Traceback" not in seen
    assert _processes_marked(marker) == []
