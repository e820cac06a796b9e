"""`band-trio runs-api` as a user runs it: one-line refusals with exit 2, and a served
process that SIGTERM closes gracefully — its running run interrupted, exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
import trio

from band_trio.cli import main
from support import group_killed_at_exit, pid_pipe, wait_group_gone

from .conftest import AUTH, DEADLINE, KEY

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize(
    ("argv", "env", "words"),
    [
        ([], {}, "the runs API key is missing"),
        (["--api-key", "short"], {}, "at least 16"),
        ([], {"BAND_RUNS_API_KEY": "has spaces in it, 16+"}, "without spaces"),
        (["--api-key", KEY, "--adapter", "nope"], {}, "MODULE:FACTORY"),
        (["--api-key", KEY, "--adapter", "no_such_module:x"], {}, "cannot load adapter"),
        (["--api-key", KEY, "--stop-wait", "-1"], {}, "--stop-wait must be seconds"),
        (["--api-key", KEY, "--max-runs", "0"], {}, "--max-runs must be a whole number"),
        # finite but no bound at all: every run at once, a wait or a memory of ages
        (["--api-key", KEY, "--max-runs", "1e18"], {}, "--max-runs must be a whole number"),
        (["--api-key", KEY, "--stop-wait", "1e300"], {}, "--stop-wait must be seconds"),
        (["--api-key", KEY, "--retention", "inf"], {}, "--retention must be seconds"),
        (["--api-key", KEY, "--port", "70000"], {}, "a port is a number"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(
    argv: list[str],
    env: dict[str, str],
    words: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BAND_RUNS_API_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["runs-api", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err
    assert "Traceback" not in err


async def _serve(*flags: str, **env_vars: str) -> tuple[trio.Process, str]:
    """`band-trio runs-api` in its own process; its URL once it listens."""
    env = {**os.environ, "BAND_RUNS_API_KEY": KEY, **env_vars}
    command = "import sys; from band_trio.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", command, "runs-api", "--port", "0", *flags]
    process = await trio.lowlevel.open_process(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=HERE
    )
    assert process.stdout is not None
    with trio.fail_after(DEADLINE):
        line = b""
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, "band-trio runs-api exited before it listened"
            line += chunk
    return process, line.decode().rsplit(" ", 1)[1].strip()


async def test_sigterm_stops_the_runs_and_exits_0() -> None:
    process, url = await _serve()
    try:
        assert process.stderr is not None
        assert url.startswith("http://127.0.0.1:")  # loopback by default
        async with httpx2.AsyncClient(base_url=url, headers=AUTH) as client:
            started = await client.post("/v1/runs", json={"input": "sleep=60"})
            run_id = started.json()["run_id"]
            async with client.stream("GET", f"/v1/runs/{run_id}/events") as events:
                process.send_signal(signal.SIGTERM)
                body = b"".join([chunk async for chunk in events.aiter_bytes()])
        assert b'"event":"run.interrupted"' in body
        assert b"the runs API is shutting down" in body
        assert body.endswith(b": stream closed\n\n")
        with trio.fail_after(DEADLINE):
            code = await process.wait()
        err = (await process.stderr.receive_some(65536)).decode()
        assert code == 0, err
        assert "SIGTERM: stopping 1 run(s)" in err
        assert "Traceback" not in err
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_second_signal_exits_1_naming_the_runs_that_ignore_the_stop() -> None:
    process, url = await _serve("--adapter", "stubborn:adapter")
    try:
        assert process.stderr is not None
        async with httpx2.AsyncClient(base_url=url, headers=AUTH) as client:
            run_id = (await client.post("/v1/runs", json={"input": "x"})).json()["run_id"]
            first = await client.post(f"/v1/runs/{run_id}/stop")
            assert first.json()["status"] == "stopping"  # it ignores it
        process.send_signal(signal.SIGTERM)
        err = b""
        with trio.fail_after(DEADLINE):
            while b"stopping 1 run(s)" not in err:
                err += await process.stderr.receive_some(65536)
            process.send_signal(signal.SIGTERM)
            code = await process.wait()
            err += await process.stderr.receive_some(65536)
        assert code == 1
        assert f"SIGTERM again; exiting with run(s) still going: {run_id}" in err.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_the_forced_exit_leaves_no_command_running(tmp_path: Path) -> None:
    """The runs that ignore the stop are left at the forced exit, but not the process
    groups their commands lead (sessions of their own): SIGKILLed first."""
    async with pid_pipe(tmp_path / "pids") as pids:
        process, url = await _serve(
            "--adapter", "stubborn:with_child", BAND_TEST_PIDS=str(pids.path)
        )
        try:
            assert process.stderr is not None
            async with httpx2.AsyncClient(base_url=url, headers=AUTH) as client:
                await client.post("/v1/runs", json={"input": "x"})
                with trio.fail_after(DEADLINE):
                    [pgid] = await pids.wait(1)
            async with group_killed_at_exit(pgid):
                process.send_signal(signal.SIGTERM)
                err = b""
                with trio.fail_after(DEADLINE):
                    while b"stopping 1 run(s)" not in err:
                        err += await process.stderr.receive_some(65536)
                    process.send_signal(signal.SIGTERM)
                    assert await process.wait() == 1
                await wait_group_gone(pgid, DEADLINE)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
