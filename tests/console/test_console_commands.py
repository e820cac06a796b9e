"""`band-trio platform --console` and `band-trio demo --console`, as real processes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio

BAND_TRIO = [sys.executable, "-m", "band_trio"]


async def _read_until(stream: trio.abc.ReceiveStream, marker: bytes) -> bytes:
    seen = b""
    while marker not in seen:
        chunk = await stream.receive_some()
        assert chunk, f"the output ended before {marker!r}: {seen!r}"
        seen += chunk
    return seen


async def _run(*args: str) -> trio.Process:
    return await trio.lowlevel.open_process(
        [*BAND_TRIO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


async def _stopped(proc: trio.Process) -> int:
    """SIGTERM by its PID, and its exit status (killed if it ignores it)."""
    proc.send_signal(signal.SIGTERM)
    with trio.move_on_after(15):
        return await proc.wait()
    proc.kill()
    await proc.wait()
    raise AssertionError(f"pid {proc.pid} ignored SIGTERM for 15 s")


async def test_platform_console_is_printed_and_in_the_ready_file(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    with trio.fail_after(30):
        proc = await _run("platform", "--console", "--ready-file", str(ready))
        try:
            assert proc.stdout is not None
            out = await _read_until(proc.stdout, b"console http://")
            url = json.loads(ready.read_text())["console_url"]
            assert url.startswith("http://127.0.0.1:") and url.endswith("/_console/")
            assert url.encode() in out
            async with httpx2.AsyncClient() as client:
                page = await client.get(url)
            assert page.status_code == 200 and b"band-trio console" in page.content
        finally:
            assert await _stopped(proc) == 0


async def test_platform_without_console_has_none(tmp_path: Path) -> None:
    # It also stops cleanly on a SIGTERM sent the moment it is ready (it used to die
    # of it: the signal handler was installed after the ready line).
    ready = tmp_path / "ready.json"
    with trio.fail_after(30):
        proc = await _run("platform", "--ready-file", str(ready))
        try:
            assert proc.stdout is not None
            out = await _read_until(proc.stdout, b"listening")
            assert json.loads(ready.read_text()).get("console_url") is None
            assert b"console" not in out
        finally:
            assert await _stopped(proc) == 0


async def test_demo_console_keeps_running_until_a_signal() -> None:
    with trio.fail_after(40):
        proc = await _run("demo", "--console")
        try:
            assert proc.stdout is not None
            out = await _read_until(proc.stdout, b"Ctrl-C stops")
            for line in (b"echo: hello", b"interrupt:", b"stop:", b"play:"):
                assert line in out
            url = out.split(b"console   ", 1)[1].split()[0].decode()
            async with httpx2.AsyncClient() as client:
                state = await client.post(
                    f"{url}api/control", json={"mode": "play", "agent_id": "nobody"}
                )
            assert state.status_code == 404  # served, and the page's actions answer
            assert "There is no agent nobody" in state.json()["error"]["message"]
        finally:
            code = await _stopped(proc)
        rest = await proc.stdout.receive_some() if proc.stdout else b""
    assert code == 0
    assert b"agent stopped" in out + rest
