"""Bridge → host, kill -9 of either process mid-turn, then a restart: nothing is
answered twice and nothing re-opened (a claim after `processed` would open a new
attempt, band-client-rest 0.0.51)."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from band_trio.platform import Platform
from ports import free_port
from support import HOST_TOKEN, Command, claims, status

from ._helpers import identity, running_bridge, running_host
from .conftest import seeded
from .test_host import _FirstBlocks, _settles

DEADLINE = 30


@asynccontextmanager
async def _band_trio(*args: str) -> AsyncIterator[Command]:
    """`python -m band_trio ARGS`, killed by its own PID on the way out if still running."""
    command = [sys.executable, "-m", "band_trio", *args]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(trio.run_process, command, stderr=subprocess.PIPE, check=False)
        )
        try:
            yield Command(process)
        finally:
            if process.returncode is None:
                process.kill()


def _host_args(platform: Platform, tmp_path: Path, port: int) -> list[str]:
    info = platform.info
    token = tmp_path / "host.token"
    token.write_text(HOST_TOKEN + "\n")
    return [
        "host", "--adapter", "band_trio.adapters:DemoAdapter", "--listen", f"127.0.0.1:{port}",
        "--agent-id", info.agent_id or "", "--api-key", info.api_key or "",
        "--rest-url", info.rest_url, "--token-file", str(token),
    ]  # fmt: skip


def _bridge_config(platform: Platform, tmp_path: Path, url: str) -> str:
    info = platform.info
    path = tmp_path / "bridge.json"
    target = {"type": "http", "url": url, "settle": "target", "token": HOST_TOKEN}
    identity = {"agent_id": info.agent_id, "api_key": info.api_key, "target": target}
    bridge = {"rest_url": info.rest_url, "ws_url": info.ws_url}
    path.write_text(json.dumps({"bridge": bridge, "identity": [identity]}))
    return str(path)


def _replies(platform: Platform, room_id: str) -> list[str]:
    agent_id = platform.info.agent_id
    return [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]


async def test_kill_9_of_the_host_mid_turn_then_a_restart_replays_on_the_same_attempt(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with trio.fail_after(DEADLINE):
        async with running_bridge([identity(platform, _settles(url))]):
            async with _band_trio(*_host_args(platform, tmp_path, port)) as host:
                await host.line("serving on")
                message_id = platform.post_message(room_id, user_id, "long sleep=600")
                await platform.wait_until(lambda: status(platform, message_id) == "processing")
                host.process.kill()
                assert await host.process.wait() == -signal.SIGKILL
            async with _band_trio(*_host_args(platform, tmp_path, port)) as again:
                await again.line("serving on")
                # the bridge's retry forwards it again: the same attempt, claimed again
                await platform.wait_until(lambda: claims(platform, message_id) == 2)
                again.process.send_signal(signal.SIGTERM)
                assert await again.process.wait() == 0
                assert b"Traceback" not in await again.rest_of_stderr()
    assert _replies(platform, room_id) == []  # never answered twice, nor half
    assert status(platform, message_id) == "processing"  # still owed: a later run answers
    assert platform.delivery(message_id)[agent_id]["attempts"] == 1
    assert platform.stats["reopened"] == 0


async def test_kill_9_of_the_bridge_mid_forward_then_a_restart_answers_it_once(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()  # the first turn runs until cut off; the replay answers
    async with running_host(platform, adapter) as (app, url):
        config = _bridge_config(platform, tmp_path, url)
        with trio.fail_after(DEADLINE):
            async with _band_trio("bridge", "--config", config) as bridge:
                await bridge.line("ready")
                message_id = platform.post_message(room_id, user_id, "outlive the bridge")
                await adapter.started.wait()
                bridge.process.kill()
                assert await bridge.process.wait() == -signal.SIGKILL
            await adapter.saw_cancel.wait()  # the forward's request went away: a stop
            while app.running(room_id) is not None:
                await app.changes.wait()
            assert status(platform, message_id) == "processing"
            async with _band_trio("bridge", "--config", config) as again:
                await platform.wait_until(lambda: status(platform, message_id) == "processed")
                again.process.send_signal(signal.SIGTERM)
                assert await again.process.wait() == 0
                assert b"Traceback" not in await again.rest_of_stderr()
    assert _replies(platform, room_id) == ["answered: outlive the bridge"]
    assert adapter.calls == [message_id, message_id]
    assert platform.delivery(message_id)[agent_id] == {"status": "processed", "attempts": 1}
    assert platform.stats["reopened"] == 0
