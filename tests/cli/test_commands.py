"""The `band-trio` command, run as real processes on loopback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import trio

from band_trio import Turn
from band_trio.platform import Platform
from support import Recorder, agent_env, running_agent, status, stop_process

BAND_TRIO = [sys.executable, "-m", "band_trio"]


@asynccontextmanager
async def process(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[trio.Process]:
    """A child process, stopped by its own PID on the way out (SIGTERM, then SIGKILL)."""
    proc = await trio.lowlevel.open_process(
        [*BAND_TRIO, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    try:
        yield proc
    finally:
        await stop_process(proc)


async def read_until(stream: trio.abc.ReceiveStream, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        chunk = await stream.receive_some()
        assert chunk, f"stream ended before {marker!r}: {seen!r}"
        seen += chunk
    return seen


async def test_platform_command_writes_the_ready_file_and_serves(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    with trio.fail_after(20):
        async with process(
            "platform", "--host", "127.0.0.1", "--port", "0", "--seed", "--ready-file", str(ready)
        ) as proc:
            assert proc.stdout is not None
            await read_until(proc.stdout, b"listening")
            info = json.loads(ready.read_text())
            for key in (
                "rest_url",
                "ws_url",
                "admin_url",
                "agent_id",
                "api_key",
                "room_id",
                "user_id",
            ):
                assert info[key], key
            async with httpx2.AsyncClient() as client:
                me = await client.get(
                    f"{info['rest_url']}/api/v1/agent/me", headers={"X-API-Key": info["api_key"]}
                )
                assert me.json()["data"]["id"] == info["agent_id"]
                posted = await client.post(
                    f"{info['admin_url']}/rooms/{info['room_id']}/messages",
                    json={"sender_id": info["user_id"], "content": "over the admin API"},
                )
                message_id = posted.json()["id"]
                delivery = await client.get(f"{info['admin_url']}/messages/{message_id}")
                assert delivery.json()["delivery"][info["agent_id"]]["status"] == "delivered"
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
    assert not ready.exists()  # removed on the way out: no agent is sent to a dead port


async def test_agent_command_serves_and_stops_gracefully_on_sigterm(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.api_key and info.room_id and info.user_id
    env = agent_env(platform)
    with trio.fail_after(20):
        async with process("agent", env=env) as proc:
            message = platform.post_message(info.room_id, info.user_id, "hello from a test")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            assert [m.content for m in platform.messages(info.room_id)][-1] == (
                "echo: hello from a test"
            )
            proc.send_signal(signal.SIGTERM)
            assert await proc.wait() == 0
            await platform.wait_until(lambda: info.agent_id not in platform.connected_agents())


async def test_agent_command_with_a_wrong_key_exits_3_with_the_reason(platform: Platform) -> None:
    info = platform.info
    with trio.fail_after(20):
        async with process(
            "agent",
            "--rest-url",
            info.rest_url,
            "--ws-url",
            info.ws_url,
            "--agent-id",
            info.agent_id or "",
            "--api-key",
            "wrong",
        ) as proc:
            assert await proc.wait() == 3
            assert proc.stderr is not None
            err = await proc.stderr.receive_some()
    assert b"refused the key" in err


async def test_agent_command_loads_an_adapter_factory(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.api_key
    with trio.fail_after(20):
        async with process(
            "agent",
            "--adapter",
            "no.such.module:make",
            "--rest-url",
            info.rest_url,
            "--ws-url",
            info.ws_url,
            "--agent-id",
            info.agent_id,
            "--api-key",
            info.api_key,
        ) as proc:
            assert await proc.wait() == 2
            assert proc.stderr is not None
            assert b"cannot load adapter" in await proc.stderr.receive_some()


async def test_demo_command_runs_and_exits_zero() -> None:
    with trio.fail_after(30):
        result = await trio.run_process(
            [*BAND_TRIO, "demo"], capture_stdout=True, capture_stderr=True, check=False
        )
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    for line in ("echo: hello", "interrupt:", "stop:", "play:", "agent stopped"):
        assert line in out


async def test_in_process_agent_against_the_platform_command(tmp_path: Path) -> None:
    """The two halves in two processes: the platform command, and the runtime here."""
    ready = tmp_path / "ready.json"
    with trio.fail_after(20):
        async with process("platform", "--seed", "--ready-file", str(ready)) as proc:
            assert proc.stdout is not None
            await read_until(proc.stdout, b"listening")
            info = json.loads(ready.read_text())
            adapter = Recorder()

            class Remote:  # just enough of Platform for agent_for()
                class info:
                    agent_id = info["agent_id"]
                    api_key = info["api_key"]
                    rest_url = info["rest_url"]
                    ws_url = info["ws_url"]

            async with running_agent(Remote, adapter) as running:  # type: ignore[arg-type]
                async with httpx2.AsyncClient() as client:
                    await client.post(
                        f"{info['admin_url']}/rooms/{info['room_id']}/messages",
                        json={"sender_id": info["user_id"], "content": "cross"},
                    )
                await adapter.wait_for(lambda: adapter.finished == ["cross"])
                assert (await running.agent.stop()).graceful


async def test_ctl_command_interrupts_stops_and_plays(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    release = trio.Event()

    async def wait_for_release(turn: Turn) -> None:
        await release.wait()
        await turn.reply("released")

    adapter = Recorder(wait_for_release)
    ctl = ["ctl", "--admin-url", info.admin_url, "--agent", info.agent_id]
    with trio.fail_after(30):
        async with running_agent(platform, adapter):
            first = platform.post_message(info.room_id, info.user_id, "first")
            await adapter.wait_for(lambda: adapter.calls == ["first"])
            done = await trio.run_process(
                [*BAND_TRIO, *ctl, "interrupt", "--room", info.room_id], capture_stdout=True
            )
            assert b"interrupt sent" in done.stdout
            await platform.wait_until(lambda: status(platform, first) == "processed")
            assert adapter.cancelled == ["first"]

            second = platform.post_message(info.room_id, info.user_id, "second")
            await adapter.wait_for(lambda: adapter.calls[-1:] == ["second"])
            await trio.run_process(
                [*BAND_TRIO, *ctl, "stop", "--reason", "enough"], capture_stdout=True
            )
            await adapter.wait_for(lambda: adapter.cancelled == ["first", "second"])
            assert status(platform, second) == "processing"

            release.set()
            await trio.run_process([*BAND_TRIO, *ctl, "play"], capture_stdout=True)
            await platform.wait_until(lambda: status(platform, second) == "processed")
    assert adapter.finished == ["second"]


async def test_ctl_without_an_admin_url_is_a_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
    result = await trio.run_process(
        [*BAND_TRIO, "ctl", "stop"], capture_stderr=True, check=False, env=env
    )
    assert result.returncode == 2
    assert b"no admin API" in result.stderr


async def test_agent_command_exits_3_with_the_reason_when_superseded(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.api_key
    env = agent_env(platform)
    with trio.fail_after(20):
        async with process("agent", env=env) as proc:
            await platform.wait_until(lambda: info.agent_id in platform.connected_agents())
            await platform.wait_until(
                lambda: any(
                    e.kind == "ws_in" and e.frame and "room_participants" in e.frame
                    for e in platform.log()
                )
            )
            platform.faults.supersede(info.agent_id, message="another instance took over")
            assert await proc.wait() == 3
            assert proc.stderr is not None
            err = b""
            while chunk := await proc.stderr.receive_some():
                err += chunk
    assert b"disconnected for good: superseded: another instance took over" in err


async def test_a_second_signal_stops_the_agent_at_once(platform: Platform) -> None:
    info = platform.info
    assert info.agent_id and info.api_key and info.room_id and info.user_id
    env = agent_env(platform)
    with trio.fail_after(20):
        async with process("agent", env=env) as proc:
            message = platform.post_message(info.room_id, info.user_id, "think sleep=600")
            await platform.wait_until(lambda: status(platform, message) == "processing")
            await platform.wait_until(
                lambda: any(
                    e.kind == "rest" and (e.path or "").endswith("/activity")
                    for e in platform.log()
                )
            )
            proc.send_signal(signal.SIGTERM)  # graceful: would wait up to 30 s for the turn
            assert proc.stderr is not None
            assert b"stopping" in await read_until(proc.stderr, b"stopping")
            proc.send_signal(signal.SIGTERM)  # at once
            with trio.fail_after(5):
                assert await proc.wait() == 0
    assert status(platform, message) == "processing"  # cancelled, never marked
