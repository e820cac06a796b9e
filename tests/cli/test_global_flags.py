"""`--log-level` and `--log-format` on either side of the command name
(docs/reference/cli.md): `band-trio agent --log-level INFO` is what people type.

Given on both sides, the one after the command wins: it is the later on the line,
as a flag given twice is anywhere else.
"""

from __future__ import annotations

import json

import pytest
import trio
from test_cli_errors import run
from test_commands import process, read_until
from test_exit_statuses import COMMANDS

from band_trio.platform import Platform
from support import agent_env


async def connected_line(platform: Platform, *args: str) -> dict[str, object]:
    """The agent's "connected to" log line, in JSON, from `band-trio ARGS` (an agent)."""
    with trio.fail_after(20):
        async with process(*args, env=agent_env(platform)) as proc:
            assert proc.stderr is not None
            seen = await read_until(proc.stderr, b"connected to")
    line = next(line for line in seen.decode().splitlines() if "connected to" in line)
    record: dict[str, object] = json.loads(line)
    return record


async def test_the_agent_takes_the_logging_flags_after_its_name(platform: Platform) -> None:
    record = await connected_line(platform, "agent", "--log-level", "INFO", "--log-format", "json")
    assert record["level"] == "INFO"


async def test_after_the_command_wins_over_before_it(platform: Platform) -> None:
    record = await connected_line(
        platform, "--log-level", "ERROR", "--log-format", "text",
        "agent", "--log-level", "info", "--log-format", "json",
    )  # fmt: skip
    assert record["level"] == "INFO"


async def test_the_platform_takes_the_logging_flags_after_its_name() -> None:
    with trio.fail_after(20):
        async with process("platform", "--port", "0", "--log-level", "DEBUG") as proc:
            assert proc.stdout is not None
            await read_until(proc.stdout, b"listening")
    refused = await run("platform", "--log-format", "json", "--log-level", "nope")
    assert refused.returncode == 2
    err = refused.stderr.decode()
    assert err.splitlines()[-1] == (
        "band-trio platform: error: argument --log-level: unknown level 'nope'"
        " (one of CRITICAL, FATAL, ERROR, WARN, WARNING, INFO, DEBUG)"
    ), err


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_the_logging_flags(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from band_trio.cli import main

    with pytest.raises(SystemExit) as exited:  # the value is checked: the flag is the command's
        main([command, "--log-format", "json", "--log-level", "nope"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"band-trio {command}: error: argument --log-level: unknown level 'nope'" in err, err


def test_a_bad_value_before_the_command_is_still_the_top_level_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from band_trio.cli import main

    with pytest.raises(SystemExit):
        main(["--log-format", "xml", "platform"])
    assert (
        "band-trio: error: argument --log-format: invalid choice: 'xml'" in capsys.readouterr().err
    )
