"""One exit-status convention for every command, as processes: `--help` and `--version`,
`ctl` against every kind of admin URL, bad URLs, and a listen that cannot happen.

Each case runs the real `band-trio` in its own process and asserts the stream each
line goes to and the status; none may print a traceback.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import trio
from test_cli_errors import one_line, run

from band_trio import __version__
from band_trio.cli import build_parser
from band_trio.cli._exits import EXIT_STATUSES
from band_trio.platform import Platform
from ports import free_port

DOCS = Path(__file__).parents[2] / "docs" / "reference" / "cli.md"


async def run_all(*commands: list[str]) -> list[subprocess.CompletedProcess[bytes]]:
    """Each `band-trio ARGS` in a process of its own, all at once; in order."""
    done: dict[int, subprocess.CompletedProcess[bytes]] = {}

    async def one(index: int, args: list[str]) -> None:
        done[index] = await run(*args)

    async with trio.open_nursery() as nursery:
        for index, args in enumerate(commands):
            nursery.start_soon(one, index, args)
    return [done[index] for index in range(len(commands))]


COMMANDS = ["platform", "agent", "demo", "ctl", "conformance", "bench", "runs-api"]
COMMANDS += ["bridge", "host"]


async def test_help_names_every_command_and_ends_with_the_exit_statuses() -> None:
    done = await run("--help")
    assert done.returncode == 0 and done.stderr == b""
    out = done.stdout.decode()
    for command in COMMANDS:
        assert re.search(rf"^\s+{command}\s+\S", out, re.MULTILINE), command
    assert out.rstrip().endswith(EXIT_STATUSES.rstrip().splitlines()[-1].strip())
    for status in ("0", "1", "2", "3", "130"):
        assert re.search(rf"^\s+{status}\s+\S", out, re.MULTILINE), status
    description = out.split("\n\n")[1]
    assert description.rstrip().endswith("."), description  # not cut mid-sentence


async def test_version_prints_the_package_version() -> None:
    done = await run("--version")
    assert done.returncode == 0
    assert done.stdout.decode().strip() == f"band-trio {__version__}"


def test_every_command_help_ends_with_the_same_statuses() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None and sorted(commands) == sorted(COMMANDS)
    for name, command in commands.items():
        text = command.format_help()  # type: ignore[attr-defined]
        assert text.rstrip().endswith(EXIT_STATUSES.rstrip()), name


def test_the_reference_documents_the_statuses_the_help_shows() -> None:
    text = DOCS.read_text()
    documented = re.findall(r"^\| (\d+) \| ", text, re.MULTILINE)
    helped = re.findall(r"^  (\d+)\s", EXIT_STATUSES, re.MULTILINE)
    assert documented == helped
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    top = text.split("\n## ", 1)[0]
    everywhere = {"-h", "--help", "--log-level", "--log-format"}  # documented once, at the top
    assert "`--log-level`" in top and "`--log-format`" in top, top
    for name, command in commands.items():  # every command and each of its flags
        assert f"## `band-trio {name}" in text, name
        section = text.split(f"## `band-trio {name}", 1)[1].split("\n## ", 1)[0]
        for action in command._actions:  # type: ignore[attr-defined]
            for flag in action.option_strings:
                if flag not in everywhere:
                    assert f"`{flag}" in section, (name, flag)


# -- ctl --------------------------------------------------------------------------


@contextmanager
def answering(status: int, body: bytes) -> Iterator[str]:
    """A loopback HTTP server answering every POST with `status` and `body`: an admin
    URL that points at something else."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/_admin"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_ctl_a_bad_or_unreachable_admin_url() -> None:
    cases = [
        ("notaurl", 2, "the admin API's URL must be http(s)://HOST[:PORT]/_admin"),
        ("ftp://127.0.0.1/_admin", 2, "the admin API's URL must be"),
        (f"http://127.0.0.1:{free_port()}/_admin", 1, "cannot reach http://127.0.0.1:"),
    ]
    results = await run_all(
        *(["ctl", "stop", "--agent", "a", "--admin-url", u] for u, _, _ in cases)
    )
    for (url, code, says), done in zip(cases, results, strict=True):
        assert done.returncode == code, url
        assert done.stdout == b""
        assert says in one_line(done), url


async def test_ctl_an_admin_url_answering_something_else_is_one_line_and_exit_1() -> None:
    cases = [
        (200, b'{"ok": true}', "answered 200 with something other than the admin API's"),
        (200, b"[1, 2", "answered 200 with something other than the admin API's"),
        (500, b"<html>oops</html>", "answered 500: '<html>oops</html>'"),
        (503, b'{"error": {"code": "busy", "message": "later"}}', "503 busy: later"),
    ]
    with contextlib.ExitStack() as servers:
        urls = [servers.enter_context(answering(status, body)) for status, body, _ in cases]
        results = await run_all(*(["ctl", "stop", "--agent", "a", "--admin-url", u] for u in urls))
    for (status, _, says), done in zip(cases, results, strict=True):
        assert done.returncode == 1, status
        assert done.stdout == b""
        assert says in one_line(done), status


async def test_ctl_an_unknown_agent_or_room_is_the_platform_s_words_and_exit_2(
    platform: Platform,
) -> None:
    admin, agent = platform.info.admin_url, platform.info.agent_id or ""
    nobody, nowhere = await run_all(
        ["ctl", "stop", "--agent", "nobody", "--admin-url", admin],
        ["ctl", "play", "--agent", agent, "--room", "nowhere", "--admin-url", admin],
    )
    assert nobody.returncode == 2 and nobody.stdout == b""
    assert one_line(nobody) == "band-trio ctl: refused: no agent nobody (404 not_found)"
    assert nowhere.returncode == 2
    assert one_line(nowhere) == "band-trio ctl: refused: no room nowhere (404 not_found)"


async def test_ctl_to_an_agent_not_connected_says_so_and_what_becomes_of_the_signal(
    platform: Platform,
) -> None:
    """No socket for the agent: an interrupt reached no one (exit 1, nothing on stdout);
    a stop or a play is still the platform's gate (exit 0), and stderr says the stop
    holds for the next agent until `ctl play`."""
    admin, agent = platform.info.admin_url, platform.info.agent_id or ""
    assert agent not in platform.connected_agents()
    interrupt, stop, play = await run_all(
        ["ctl", "interrupt", "--agent", agent, "--admin-url", admin],
        ["ctl", "stop", "--agent", agent, "--admin-url", admin],
        ["ctl", "play", "--agent", agent, "--admin-url", admin],
    )
    assert interrupt.returncode == 1 and interrupt.stdout == b""
    assert one_line(interrupt) == (
        f"band-trio ctl: no agent connected: the interrupt reached no one "
        f"(agent {agent} has no socket open; nothing was running to interrupt)"
    )
    assert stop.returncode == 0
    assert stop.stdout.startswith(f"stop sent to agent {agent}, every room".encode())
    assert one_line(stop) == (
        "band-trio ctl: no agent connected: the platform holds every room stopped: "
        "the agent answers nothing there when it connects, until `band-trio ctl play`"
    )
    assert play.returncode == 0
    assert one_line(play) == (
        "band-trio ctl: no agent connected: the platform opened every room's gate: "
        "the agent answers there when it connects"
    )


# -- URLs and listening -------------------------------------------------------------

AGENT = ["agent", "--agent-id", "a", "--api-key", "k"]


async def test_a_bad_rest_or_websocket_url_is_exit_2() -> None:
    ws, rest = "ws://127.0.0.1:9/", "http://127.0.0.1:9"
    host = ["host", "--adapter", "band_trio.adapters:DemoAdapter", "--agent-id", "a"]
    cases = [
        ([*AGENT, "--rest-url", "notaurl", "--ws-url", ws], "not an http(s) REST URL: 'notaurl'"),
        ([*AGENT, "--rest-url", "http://h:port", "--ws-url", ws], "not an http(s) REST URL"),
        ([*AGENT, "--rest-url", rest, "--ws-url", "notaurl"], "not a websocket URL"),
        (
            [*host, "--api-key", "k", "--rest-url", "notaurl", "--insecure-no-token"],
            "not an http(s) REST URL: 'notaurl'",
        ),
    ]
    for (args, says), done in zip(cases, await run_all(*(a for a, _ in cases)), strict=True):
        assert done.returncode == 2, (args, done.stderr)
        assert says in one_line(done), args


def host_args(platform: Platform, *extra: str) -> list[str]:
    info = platform.info
    return [
        "host", "--adapter", "band_trio.adapters:DemoAdapter", "--agent-id", info.agent_id or "",
        "--api-key", info.api_key or "", "--rest-url", info.rest_url, *extra,
    ]  # fmt: skip


async def test_a_host_that_cannot_reach_its_platform_is_one_line_and_exit_1() -> None:
    done = await run(
        "host", "--adapter", "band_trio.adapters:DemoAdapter", "--agent-id", "a",
        "--api-key", "k", "--rest-url", f"http://127.0.0.1:{free_port()}", "--insecure-no-token",
    )  # fmt: skip
    assert done.returncode == 1
    line = [x for x in done.stderr.decode().splitlines() if "WARNING" not in x]
    assert "Traceback" not in done.stderr.decode()
    assert len(line) == 1 and line[0].startswith("band-trio host: GET me: "), line


async def test_a_key_that_is_another_agent_s_is_exit_3_on_agent_and_host(
    platform: Platform,
) -> None:
    """One rule for an agent id the key does not belong to: the platform refused the
    credentials (3), not bad usage (2) — on `agent` (the socket's 403) and on `host`
    (its `GET /me` names another agent) alike, and `--help` says so."""
    info = platform.info
    key, rest = info.api_key or "", info.rest_url
    agent, host = await run_all(
        ["agent", "--agent-id", "wrong", "--api-key", key, "--rest-url", rest,
         "--ws-url", info.ws_url],
        ["host", "--adapter", "band_trio.adapters:DemoAdapter", "--agent-id", "wrong",
         "--api-key", key, "--rest-url", rest, "--insecure-no-token", "--listen", "127.0.0.1:0"],
    )  # fmt: skip
    assert agent.returncode == 3, agent.stderr
    assert one_line(agent) == (
        "band-trio agent: disconnected for good: forbidden: agent_id does not match the API key"
    )
    assert host.returncode == 3, host.stderr
    lines = [x for x in host.stderr.decode().splitlines() if "WARNING" not in x]
    assert "Traceback" not in host.stderr.decode()
    assert lines == [
        f"band-trio host: the platform refused the key: 403 forbidden: "
        f"the API key is {info.agent_id}'s, not agent wrong's"
    ], lines
    two = EXIT_STATUSES.split("\n  3 ")[0].split("\n  2 ")[1]
    three = EXIT_STATUSES.split("\n  3 ")[1].split("\n  130 ")[0]
    assert "unknown agent" not in two.replace("\n", " ").replace("ctl", ""), two
    assert "another agent's" in " ".join(three.split()), three


def bridge_config(platform: Platform, tmp_path: Path, **bridge: object) -> Path:
    info = platform.info
    path = tmp_path / "bridge.json"
    identity = {
        "agent_id": info.agent_id,
        "api_key": info.api_key,
        "target": {"type": "http", "url": "http://127.0.0.1:9/"},
    }
    data = {"bridge": {"rest_url": info.rest_url, "ws_url": info.ws_url, **bridge}}
    path.write_text(json.dumps({**data, "identity": [identity]}))
    return path


async def test_a_listen_that_cannot_happen_reads_plainly(
    platform: Platform, tmp_path: Path
) -> None:
    """A port in use or an unknown host name: one line naming the address and the
    reason, exit 2 — for the host, the bridge's health and the runs API alike."""
    token = tmp_path / "token"
    token.write_text("t" * 20)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = [
            (host_args(platform, "--insecure-no-token", "--listen", f"127.0.0.1:{port}"),
             f"cannot listen on 127.0.0.1:{port}: Address already in use"),
            (host_args(platform, "--token-file", str(token), "--allow-remote",
                       "--listen", "no-such-host.invalid:0"),
             "cannot listen on no-such-host.invalid:0: "),
            (["bridge", "--config", str(bridge_config(platform, tmp_path,
                                                        health=f"127.0.0.1:{port}"))],
             f"cannot listen on 127.0.0.1:{port}: Address already in use"),
            (["runs-api", "--api-key", "k" * 20, "--port", str(port)],
             f"cannot listen on 127.0.0.1:{port}: Address already in use"),
        ]  # fmt: skip
        results = await run_all(*(args for args, _ in cases))
    for (args, says), done in zip(cases, results, strict=True):
        err = done.stderr.decode()
        assert done.returncode == 2, (args, err)
        assert "Traceback" not in err and "Trio nursery" not in err, err
        lines = [line for line in err.splitlines() if "WARNING" not in line]
        assert len(lines) == 1 and says in lines[0], (args, err)


async def test_a_bridge_config_with_a_header_no_forward_could_send_is_exit_2(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bridge.json"
    target = {"type": "http", "url": "http://127.0.0.1:9/", "headers": {"X-A": "a\r\nB: c"}}
    identity = {
        "agent_id": "a", "api_key": "k", "rest_url": "http://127.0.0.1:9",
        "ws_url": "ws://127.0.0.1:9/api/v1/socket/websocket", "target": target,
    }  # fmt: skip
    path.write_text(json.dumps({"identity": [identity]}))
    done = await run("bridge", "--config", str(path))
    assert done.returncode == 2 and done.stdout == b""
    assert "$.identity[0].target.headers.X-A: a header value must be" in one_line(done)


# -- ready files ----------------------------------------------------------------------


async def test_a_ready_file_left_by_a_platform_that_is_gone_is_one_line_and_exit_2(
    platform: Platform, tmp_path: Path
) -> None:
    """The platform removes its ready file when it exits; one left behind (a platform
    killed with SIGKILL) names a pid that is gone, and says so."""
    gone = await trio.lowlevel.open_process(["true"])
    await gone.wait()  # a pid that has exited and been reaped
    info = json.loads(msgspec.json.encode(platform.info))
    ready = tmp_path / "ready.json"
    ready.write_text(json.dumps({**info, "pid": gone.pid}))
    for args in (["agent"], ["ctl", "stop"]):
        done = await run(*args, "--ready-file", str(ready))
        assert done.returncode == 2, done.stderr
        line = one_line(done)
        assert f"{ready} is stale: the platform that wrote it (pid {gone.pid}) is not" in line


async def test_a_ready_file_whose_platform_does_not_answer_says_where_the_url_came_from(
    tmp_path: Path,
) -> None:
    port = free_port()
    ready = tmp_path / "ready.json"
    ready.write_text(
        json.dumps(
            {
                "rest_url": f"http://127.0.0.1:{port}",
                "ws_url": f"ws://127.0.0.1:{port}/api/v1/socket/websocket",
                "admin_url": f"http://127.0.0.1:{port}/_admin",
                "agent_id": "a",
                "api_key": "k",
            }
        )
    )
    done = await run("agent", "--ready-file", str(ready))
    assert done.returncode == 1
    line = one_line(done)
    assert line.startswith(f"band-trio agent: cannot reach the platform at http://127.0.0.1:{port}")
    assert line.endswith(f"(the URL is from {ready}: is that platform still running?)")
