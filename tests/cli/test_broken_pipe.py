"""A reader of stdout that goes away (`band-trio demo | head -3`) ends the command
quietly: exit 141 (what a shell shows for a tool killed by SIGPIPE), nothing on
stderr — no `BrokenPipeError` traceback, no "Exception ignored" at exit.

The reader is closed before the command starts, so every write of it meets the
broken pipe: deterministic, whatever the command's timing."""

from __future__ import annotations

import os
import sys

import pytest
import trio

from band_trio.cli import EXIT_PIPE

DEADLINE = 30


async def _with_stdout_gone(*args: str) -> tuple[int, bytes]:
    read, write = os.pipe()
    os.close(read)  # the reader went away (`| head` exited)
    try:
        done = await trio.run_process(
            [sys.executable, "-m", "band_trio", *args],
            stdout=write,
            capture_stderr=True,
            check=False,
        )
    finally:
        os.close(write)
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),  # argparse's own print, then SystemExit
        ("demo",),  # a print inside trio.run, in nested nurseries
        ("platform", "--seed", "--port", "0"),  # a server's first lines, then it serves
    ],
    ids=["help", "demo", "platform"],
)
async def test_a_reader_gone_ends_the_command_quietly_with_141(args: tuple[str, ...]) -> None:
    with trio.fail_after(DEADLINE):
        code, err = await _with_stdout_gone(*args)
    assert err == b""
    assert code == EXIT_PIPE == 141


async def test_a_broken_pipe_that_is_not_stdout_keeps_its_traceback() -> None:
    """Only a broken stdout is quiet: with stdout fine, a BrokenPipeError is a bug."""
    code = (
        "import sys; from band_trio import cli;"
        "cli._main = lambda argv: (_ for _ in ()).throw(BrokenPipeError(32, 'elsewhere'));"
        "sys.exit(cli.main([]))"
    )
    with trio.fail_after(DEADLINE):
        done = await trio.run_process(
            [sys.executable, "-c", code], capture_stdout=True, capture_stderr=True, check=False
        )
    assert done.returncode == 1 and b"Traceback" in done.stderr and b"elsewhere" in done.stderr
