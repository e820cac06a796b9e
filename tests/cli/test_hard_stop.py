"""The second SIGTERM ends `agent`, `bridge`, `host` and `runs-api` within about a second,
whatever a peer does (issue 21).

Each command runs as a real process whose adapter (or target) talks to an A2A
peer that accepts the request and never answers (tests/peers/silent.py, served
from this test's own trio run): the start of the A2A task is shielded, so that
an interrupt cannot orphan it. Before, the second signal cancelled the command's
scope without recording any abort, and the start stayed shielded until httpx2's
300 s backstop (the bridge's hard stop took 295 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio

from band_trio.platform import Platform
from peers import SilentPeer, silent_peer
from support import (
    HOST_TOKEN,
    Command,
    agent_env,
    band_trio,
    envelope,
    group_killed_at_exit,
    pid_pipe,
    seeded,
    status,
    wait_group_gone,
)

STARTUP = 30
AFTER_SECOND_SIGNAL = 5
"""The bound asserted: 'about a second' (`Policy.hard_stop_deadline` is 1 s), with room
for a loaded machine; the old commands took 300 s."""
KEY = "a-runs-api-key-of-16+"


async def second_signal_ends_it(cmd: Command) -> int:
    """SIGTERM, then SIGTERM again once the first was taken; the exit status."""
    cmd.process.send_signal(signal.SIGTERM)
    await cmd.line("stopping")
    cmd.process.send_signal(signal.SIGTERM)
    with trio.fail_after(AFTER_SECOND_SIGNAL):
        code = await cmd.process.wait()
    err = await cmd.rest_of_stderr()
    assert b"Traceback" not in err, err.decode()
    assert code == 0, err.decode()
    return code


def a2a_env(peer: SilentPeer) -> dict[str, str]:
    return {"BAND_A2A_URL": peer.url, "BAND_A2A_STREAMING": "yes"}


async def test_agent(platform: Platform) -> None:
    _, room, user = seeded(platform)
    async with silent_peer() as peer:
        env = {**agent_env(platform), **a2a_env(peer)}
        async with band_trio("agent", "--adapter", "band_trio.adapters:a2a", env=env) as cmd:
            with trio.fail_after(STARTUP):
                await platform.wait_until(lambda: bool(platform.connected_agents()))
                message = platform.post_message(room, user, "hello")
                await peer.wait_requests(1)
            assert await second_signal_ends_it(cmd) == 0
    assert status(platform, message) == "processing"  # left for a later replay


async def test_bridge(platform: Platform, tmp_path: Path) -> None:
    info = platform.info
    _, room, user = seeded(platform)
    async with silent_peer() as peer:
        config = tmp_path / "bridge.json"
        config.write_text(
            json.dumps(
                {
                    "bridge": {"rest_url": info.rest_url, "ws_url": info.ws_url},
                    "identity": [
                        {
                            "agent_id": info.agent_id,
                            "api_key": info.api_key,
                            "target": {"type": "a2a", "url": peer.url, "streaming": True},
                        }
                    ],
                }
            )
        )
        async with band_trio("bridge", "--config", str(config), env={}) as cmd:
            with trio.fail_after(STARTUP):
                await cmd.line("ready")
                message = platform.post_message(room, user, "hello")
                await peer.wait_requests(1)
            assert await second_signal_ends_it(cmd) == 0
    assert status(platform, message) == "processing"


async def post_quietly(url: str, body: dict[str, object], key: str | None = None) -> None:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(timeout=None) as client:
        with contextlib.suppress(httpx2.HTTPError):  # the server going away is the point
            await client.post(url, json=body, headers=headers)


async def test_host(platform: Platform) -> None:
    _, room, user = seeded(platform)
    message = platform.post_message(room, user, "hello")
    async with silent_peer() as peer, trio.open_nursery() as nursery:
        env = {**agent_env(platform), **a2a_env(peer), "BAND_HOST_TOKEN": HOST_TOKEN}
        argv = ["host", "--adapter", "band_trio.adapters:a2a", "--listen", "127.0.0.1:0"]
        async with band_trio(*argv, env=env) as cmd:
            with trio.fail_after(STARTUP):
                url = (await cmd.line("serving on")).rsplit(" ", 1)[1]
                nursery.start_soon(post_quietly, url, envelope(platform, message), HOST_TOKEN)
                await peer.wait_requests(1)
            assert await second_signal_ends_it(cmd) == 0
    assert status(platform, message) == "processing"


async def test_runs_api() -> None:
    """The runs API's first signal stops every run (each start bounded by the stop
    grace, recorded before the cancel); a second exits at once."""
    async with silent_peer() as peer, trio.open_nursery() as nursery:
        env = {**a2a_env(peer), "BAND_RUNS_API_KEY": KEY}
        argv = ["runs-api", "--adapter", "band_trio.adapters:a2a", "--port", "0"]
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "band_trio", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
        )
        cmd = Command(process)
        try:
            with trio.fail_after(STARTUP):
                assert process.stdout is not None
                said = b""
                while b"listening on" not in said:
                    said += await process.stdout.receive_some()
                url = said.decode().split("listening on ", 1)[1].split()[0]
                nursery.start_soon(post_quietly, f"{url}/v1/runs", {"input": "hello"}, KEY)
                await peer.wait_requests(1)
            process.send_signal(signal.SIGTERM)
            await cmd.line("stopping")
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(AFTER_SECOND_SIGNAL):
                await process.wait()
            err = await cmd.rest_of_stderr()
            assert b"Traceback" not in err, err.decode()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_an_adapter_that_ignores_the_cancel_cannot_hold_the_agent(platform: Platform) -> None:
    """The backstop: past `Policy.hard_stop_deadline` after the second signal the command
    exits 1, naming the turn still running, without it."""
    _, room, user = seeded(platform)
    argv = ["agent", "--adapter", "base_exits:stuck"]
    async with band_trio(*argv, env=agent_env(platform), cwd=Path(__file__).parent) as cmd:
        with trio.fail_after(STARTUP):
            await platform.wait_until(lambda: bool(platform.connected_agents()))
            message = platform.post_message(room, user, "hello")
            assert cmd.process.stdout is not None
            said = b""
            while b"stuck" not in said:
                said += await cmd.process.stdout.receive_some()
        cmd.process.send_signal(signal.SIGTERM)
        await cmd.line("stopping")
        cmd.process.send_signal(signal.SIGTERM)
        with trio.fail_after(AFTER_SECOND_SIGNAL):
            assert await cmd.process.wait() == 1
        err = (await cmd.rest_of_stderr()).decode()
    assert f"still running 1s after the second signal (turns {room}: {message})" in err
    assert "Traceback" not in err


async def test_the_backstops_exit_leaves_no_command_running(
    platform: Platform, tmp_path: Path
) -> None:
    """Past `Policy.hard_stop_deadline` the command exits without the turn; the process
    group its `run_command` leads (a session of its own) is SIGKILLed first, not left
    running for ever."""
    _, room, user = seeded(platform)
    argv = ["agent", "--adapter", "base_exits:stuck_with_child"]
    async with pid_pipe(tmp_path / "pids") as pids:
        env = {**agent_env(platform), "BAND_TEST_PIDS": str(pids.path)}
        async with band_trio(*argv, env=env, cwd=Path(__file__).parent) as cmd:
            with trio.fail_after(STARTUP):
                await platform.wait_until(lambda: bool(platform.connected_agents()))
                platform.post_message(room, user, "hello")
                [pgid] = await pids.wait(1)
            async with group_killed_at_exit(pgid):
                cmd.process.send_signal(signal.SIGTERM)
                await cmd.line("stopping")
                cmd.process.send_signal(signal.SIGTERM)
                with trio.fail_after(AFTER_SECOND_SIGNAL):
                    assert await cmd.process.wait() == 1
                await wait_group_gone(pgid, AFTER_SECOND_SIGNAL)
