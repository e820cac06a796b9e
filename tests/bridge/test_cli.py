"""`band-trio bridge` and `band-trio host` as processes: config errors are one line and
exit 2; SIGTERM stops gracefully with 0; every identity lost exits 3 by itself."""

from __future__ import annotations

import functools
import gc
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import trio

from band_trio.cli import EXIT_CONFIG, EXIT_CRASH, EXIT_DISCONNECTED, main
from band_trio.platform import Platform
from band_trio.testing import open_recording_target
from support import HOST_TOKEN, Command, bridge_config_out_of_reach, envelope

from .conftest import seeded


def test_a_missing_config_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bridge", "--config", str(tmp_path / "nope.toml")]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.startswith("band-trio: cannot read") and err.count("\n") == 1


def test_a_bad_config_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text('[[identity]]\nagent_id = "a"\napi_key = "k"\ntarget = { type = "smoke" }\n')
    assert main(["bridge", "--config", str(path)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "$.identity[0].target" in err and "Traceback" not in err and err.count("\n") == 1


def test_a_host_without_an_identity_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("BAND_AGENT_ID", "BAND_API_KEY", "BAND_REST_URL"):
        monkeypatch.delenv(name, raising=False)
    code = main(["host", "--adapter", "band_trio.adapters:DemoAdapter"])
    assert code == EXIT_CONFIG
    assert capsys.readouterr().err == "band-trio: the host needs the agent's agent id\n"


def _config(platform: Platform, tmp_path: Path, url: str) -> Path:
    info = platform.info
    path = tmp_path / "bridge.json"
    path.write_text(
        json.dumps(
            {
                "bridge": {
                    "health": "127.0.0.1:0",
                    "rest_url": info.rest_url,
                    "ws_url": info.ws_url,
                },
                "identity": [
                    {
                        "agent_id": info.agent_id,
                        "api_key": info.api_key,
                        "target": {"type": "http", "url": url},
                    }
                ],
            }
        )
    )
    return path


@asynccontextmanager
async def _bridge_process(config: Path) -> AsyncIterator[Command]:
    command = [sys.executable, "-m", "band_trio", "bridge", "--config", str(config)]
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(trio.run_process, command, stderr=subprocess.PIPE, check=False)
        )
        try:
            yield Command(process)
        finally:
            if process.returncode is None:
                process.kill()


async def test_the_bridge_process_forwards_serves_health_and_stops_on_sigterm(
    platform: Platform, tmp_path: Path
) -> None:
    _, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        _bridge_process(_config(platform, tmp_path, target.url)) as proc,
    ):
        with trio.fail_after(20):
            ready = await proc.line("ready")
            assert "1 of 1 identities connected" in ready
            url = ready.rsplit(" ", 1)[1]
            async with httpx2.AsyncClient() as client:
                health = await client.get(url)
            assert health.status_code == 200 and health.json()["healthy"] is True
            message_id = platform.post_message(room_id, user_id, "through the process")
            await target.wait_until(lambda: message_id in target.message_ids())
            proc.process.send_signal(signal.SIGTERM)
            assert await proc.process.wait() == 0


async def test_the_bridge_process_exits_3_once_every_identity_is_gone(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, _, _ = seeded(platform)
    async with (
        open_recording_target() as target,
        _bridge_process(_config(platform, tmp_path, target.url)) as proc,
    ):
        with trio.fail_after(20):
            await proc.line("ready")
            platform.faults.supersede(agent_id)
            assert await proc.process.wait() == EXIT_DISCONNECTED
            line = await proc.line("every identity ended for good")
            assert agent_id in line


async def test_a_second_signal_stops_the_bridge_at_once(platform: Platform, tmp_path: Path) -> None:
    _, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        _bridge_process(_config(platform, tmp_path, target.url)) as proc,
    ):
        with trio.fail_after(20):
            await proc.line("ready")
            target.hold = True  # the forward in flight would get the 10 s grace
            message_id = platform.post_message(room_id, user_id, "held")
            await target.wait_until(lambda: message_id in target.message_ids())
            proc.process.send_signal(signal.SIGTERM)
            await proc.line("stopping (again to force)")
        with trio.fail_after(5):  # well inside the grace
            proc.process.send_signal(signal.SIGTERM)
            assert await proc.process.wait() == 0
            await target.received[0].closed.wait()


async def test_the_host_process_runs_the_adapter_for_an_envelope(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    info = platform.info
    message_id = platform.post_message(room_id, user_id, "hello host")
    token = tmp_path / "host.token"
    token.write_text(HOST_TOKEN + "\n")
    command = [
        sys.executable, "-m", "band_trio", "host", "--adapter", "band_trio.adapters:DemoAdapter",
        "--listen", "127.0.0.1:0", "--agent-id", agent_id, "--api-key", info.api_key or "",
        "--rest-url", info.rest_url, "--token-file", str(token),
    ]  # fmt: skip
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            functools.partial(trio.run_process, command, stderr=subprocess.PIPE, check=False)
        )
        proc = Command(process)
        try:
            with trio.fail_after(20):
                url = (await proc.line("serving on")).rsplit(" ", 1)[1]
                forward = envelope(platform, message_id, "hello host")
                bearer = {"authorization": f"Bearer {HOST_TOKEN}"}
                async with httpx2.AsyncClient(timeout=None, headers=bearer) as client:
                    answer = await client.post(url, json=forward)
                assert answer.json() == {"outcome": "processed"}
                process.send_signal(signal.SIGTERM)
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()


def test_a_platform_out_of_reach_for_every_identity_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = gc.get_threshold()  # the command tunes the collector: put it back
    try:
        _out_of_reach(tmp_path, capsys)
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def _out_of_reach(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = bridge_config_out_of_reach(tmp_path / "bridge.json")
    assert main(["bridge", "--config", str(path)]) == EXIT_CRASH
    assert "every identity ended for good (a)" in capsys.readouterr().err
