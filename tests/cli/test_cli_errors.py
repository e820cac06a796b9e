"""`band-trio` given wrong flags, settings and files: one clear line, and the right status.

Every case runs the real command in its own process; none may print a
traceback, and each must exit by itself.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from test_commands import BAND_TRIO, process, read_until

from band_trio.platform import Platform
from support import status

EXIT_CONFIG, EXIT_DISCONNECTED = 2, 3
AGENT = ["agent", "--agent-id", "a", "--api-key", "k", "--rest-url", "http://127.0.0.1:9"]
HOST = [
    "host", "--adapter", "band_trio.adapters:DemoAdapter",
    "--agent-id", "a", "--api-key", "k", "--rest-url", "http://127.0.0.1:9",
]  # fmt: skip
RUNS = ["runs-api", "--api-key", "runs-key-0123456789abcdef"]
SHORT = Path(__file__).parent / "short.token"


async def run(*args: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(30):
        return await trio.run_process(
            [*BAND_TRIO, *args], capture_stdout=True, capture_stderr=True, check=False
        )


def one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["platform", "--host", "0.0.0.0"], "binds loopback only"),
        (["platform", "--port", "70000"], "a port is a number from 0 to 65535"),
        (["platform", "--port", "-1"], "a port is a number from 0 to 65535"),
        (["platform", "--db", "/nonexistent/folder/band.db"], "no folder /nonexistent/folder"),
        (["platform", "--ready-file", "/nonexistent/folder/r.json"], "cannot write the ready file"),
        ([*AGENT, "--ws-url", "garbage"], "not a websocket URL"),
        ([*AGENT, "--ws-url", "http://127.0.0.1:9/x"], "not a websocket URL"),
        ([*AGENT, "--ws-url", "ws://127.0.0.1:9/", "--adapter", "nope"], "MODULE:FACTORY"),
        ([*AGENT, "--ws-url", "ws://127.0.0.1:9/", "--adapter", "json:loads"], "raised TypeError"),
        ([*AGENT, "--ws-url", "ws://127.0.0.1:9/", "--adapter", "json:dumps"], "raised TypeError"),
        ([*AGENT, "--ws-url", "ws://127.0.0.1:9/", "--adapter", "os:getcwd"], "not an Adapter"),
        ([*AGENT, "--ws-url", "ws://127.0.0.1:9/", "--adapter", "no.such:x"], "cannot load"),
        (["agent", "--ready-file", "/nonexistent/ready.json"], "cannot read /nonexistent"),
        (["agent", "--ready-file", "/dev/zero"], "cannot read /dev/zero: not a file"),
        (["ctl", "stop", "--ready-file", "/dev/zero"], "cannot read /dev/zero: not a file"),
        (HOST, "the host's token is missing: give --token-file FILE or BAND_HOST_TOKEN"),
        ([*HOST, "--token-file", "/nonexistent/t"], "cannot read the token file /nonexistent/t"),
        ([*HOST, "--token-file", str(SHORT)], "must be at least 16 printable characters"),
        ([*HOST, "--listen", "nope"], "--listen must be HOST:PORT"),
        ([*HOST, "--listen", "0.0.0.0:0"], "give --allow-remote to mean it"),
        ([*HOST, "--listen", "[::]:0", "--insecure-no-token"], "give --allow-remote to mean it"),
        (
            [*HOST, "--listen", "0.0.0.0:0", "--allow-remote", "--insecure-no-token"],
            "--insecure-no-token serves loopback only",
        ),
        ([*HOST, "--insecure-no-token", "--token-file", str(SHORT)], "give one"),
        ([*RUNS, "--host", "0.0.0.0"], "the runs API listens on loopback only"),
        ([*RUNS, "--host", "192.0.2.1"], "give --allow-remote to mean it"),
    ],
)
async def test_a_configuration_error_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    done = await run(*args)
    assert done.returncode == EXIT_CONFIG, done.stderr
    assert says in one_line(done)


@pytest.mark.parametrize("where", ["proc", "folder", "file in a file"])
async def test_a_ready_file_that_cannot_be_written_is_one_line_before_the_start(
    tmp_path: Path, where: str
) -> None:
    """An unwritable `--ready-file` (a folder no file can be made in — /proc refuses
    even root —, a folder in the file's place, a file in the place of its folder) is
    found before the platform listens: nothing on stdout, one line, exit 2."""
    (tmp_path / "a-file").write_text("")
    target = {
        "proc": "/proc/band-trio-ready.json",
        "folder": str(tmp_path),
        "file in a file": str(tmp_path / "a-file" / "ready.json"),
    }[where]
    done = await run("platform", "--ready-file", target)
    assert done.returncode == EXIT_CONFIG, done.stderr
    assert f"cannot write the ready file {target}" in one_line(done)
    assert done.stdout == b""  # checked before the platform started
    assert sorted(os.listdir(tmp_path)) == ["a-file"]  # no temp file left


async def test_a_database_that_is_not_sqlite_is_one_line(tmp_path: Path) -> None:
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_text("just some notes\n" * 100)
    done = await run("platform", "--db", str(not_a_db))
    assert done.returncode == EXIT_CONFIG
    assert "is not a database" in one_line(done)
    assert not_a_db.read_text().startswith("just some notes")  # left as it was


async def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = await run("platform", "--port", str(taken.getsockname()[1]))
    assert done.returncode == EXIT_CONFIG
    assert "Address already in use" in one_line(done)


async def test_an_unknown_log_level_is_a_usage_error() -> None:
    done = await run("--log-level", "bogus", "platform")
    assert done.returncode == EXIT_CONFIG
    assert b"unknown level 'bogus'" in done.stderr and b"Traceback" not in done.stderr


async def test_a_websocket_path_the_platform_does_not_serve_ends_with_exit_3(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.api_key
    wrong = info.ws_url.replace("/api/v1/socket/websocket", "/socket/websocket")
    done = await run(
        "agent", "--agent-id", info.agent_id, "--api-key", info.api_key,
        "--rest-url", info.rest_url, "--ws-url", wrong,
    )  # fmt: skip
    assert done.returncode == EXIT_DISCONNECTED
    assert "disconnected for good: not_found" in one_line(done)
    refused = [e for e in platform.log() if e.kind == "ws_open" and e.status == 404]
    assert len(refused) == 1  # tried once, not forever


async def test_the_agent_reads_its_settings_from_a_ready_file(
    platform: Platform, tmp_path: Path
) -> None:
    info = platform.info
    assert info.room_id and info.user_id
    ready = tmp_path / "ready.json"
    ready.write_text(
        json.dumps(
            {
                "rest_url": info.rest_url,
                "ws_url": info.ws_url,
                "admin_url": info.admin_url,
                "agent_id": info.agent_id,
                "api_key": info.api_key,
            }
        )
    )
    with trio.fail_after(30):
        async with process("agent", "--ready-file", str(ready)) as proc:
            message = platform.post_message(info.room_id, info.user_id, "from a ready file")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            proc.terminate()
            assert await proc.wait() == 0
            assert proc.stderr is not None
            await read_until(proc.stderr, b"stopping")


def test_the_cli_module_runs_as_a_script() -> None:
    done = subprocess.run([sys.executable, "-m", "band_trio", "--help"], capture_output=True)
    assert done.returncode == 0 and b"band-trio" in done.stdout


@pytest.mark.parametrize(
    ("env", "args", "says"),
    [
        ({}, ["--adapter", "band_trio.adapters:openai_chat"], "BAND_OPENAI_BASE_URL is not set"),
        (
            {"BAND_OPENAI_BASE_URL": "ftp://x"},
            ["--adapter", "band_trio.adapters:openai_chat"],
            "BAND_OPENAI_BASE_URL",
        ),
        ({}, ["--adapter", "band_trio.adapters:a2a"], "BAND_A2A_URL"),
        ({}, ["--adapter", "band_trio.adapters:command"], "BAND_COMMAND"),
        (
            {"BAND_COMMAND": "no-such-program-anywhere --flag"},
            ["--adapter", "band_trio.adapters:command"],
            "no-such-program-anywhere",
        ),
        ({"BAND_WHILE_BUSY": "sometimes"}, [], "BAND_WHILE_BUSY must be one of"),
        (
            {"BAND_COPILOT_CLI": "/bin/sh", "BAND_COPILOT_BASE_URL": "http://127.0.0.1:9/v1"},
            ["--adapter", "band_trio.adapters:copilot"],
            "BAND_COPILOT_MODEL is required",
        ),
        (
            {
                "BAND_COPILOT_CLI": "/bin/sh",
                "BAND_COPILOT_MODEL": "m",
                "BAND_COPILOT_BASE_URL": "http://127.0.0.1:9/v1",
                "BAND_COPILOT_ALLOW": "read,everything",
            },
            ["--adapter", "band_trio.adapters:copilot"],
            "unknown Copilot permission kind(s) ['everything']",
        ),
    ],
)
async def test_a_reference_adapter_without_its_settings_is_one_line_and_exit_2(
    env: dict[str, str], args: list[str], says: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
    with trio.fail_after(30):
        done = await trio.run_process(
            [*BAND_TRIO, *AGENT, "--ws-url", "ws://127.0.0.1:9/", *args],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env={**clean, **env},
        )
    assert done.returncode == EXIT_CONFIG, done.stderr
    assert says in one_line(done)
