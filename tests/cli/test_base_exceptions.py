"""An adapter that raises `SystemExit`, `KeyboardInterrupt` or `GeneratorExit` fails its
turn, and the process goes on: `band-trio agent`, `host`, `runs-api` and `conformance`,
each a real process (issue 21, item 8). A real Ctrl-C still stops a program that
runs an agent.

Before: under `runs-api` one run's `sys.exit(3)` ended the server (and lost an
unrelated run), under `band-trio agent` the agent died, and `conformance` printed
a traceback instead of a failed row.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import trio

from band_trio.platform import Platform
from support import replies, seeded, status

HERE = Path(__file__).resolve().parent
DEADLINE = 30
KINDS = ["SystemExit", "KeyboardInterrupt", "GeneratorExit"]
KEY = "a-runs-api-key-of-16+"


class Command:
    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.err = b""

    async def line(self, containing: str) -> str:
        assert self.process.stderr is not None
        while True:
            for line in self.err.decode(errors="replace").splitlines():
                if containing in line:
                    return line
            chunk = await self.process.stderr.receive_some()
            if not chunk:
                raise AssertionError(f"stderr ended without {containing!r}: {self.err!r}")
            self.err += chunk

    async def stop(self) -> int:
        """SIGTERM, and the exit status (stderr read to its end meanwhile)."""
        self.process.send_signal(signal.SIGTERM)
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.receive_some():
            self.err += chunk
        return await self.process.wait()


@asynccontextmanager
async def command(*argv: str, env: dict[str, str] | None = None) -> AsyncIterator[Command]:
    """`band-trio ARGV...` with this folder as its cwd (where `base_exits` is)."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "band_trio", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=HERE,
    )
    try:
        yield Command(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def identity_env(platform: Platform) -> dict[str, str]:
    info = platform.info
    assert info.agent_id and info.api_key
    return {
        "BAND_REST_URL": info.rest_url,
        "BAND_WS_URL": info.ws_url,
        "BAND_AGENT_ID": info.agent_id,
        "BAND_API_KEY": info.api_key,
    }


async def test_agent(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        env = identity_env(platform)
        async with command("agent", "--adapter", "base_exits:raises", env=env) as cmd:
            await platform.wait_until(lambda: bool(platform.connected_agents()))
            failing = [platform.post_message(room, user, f"raise {kind}") for kind in KINDS]
            await platform.wait_until(
                lambda: [status(platform, m) for m in failing] == ["failed"] * 3
            )
            after = platform.post_message(room, user, "still there?")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            assert await cmd.stop() == 0, cmd.err.decode()
    assert replies(platform, room) == ["echo: still there?"]


def envelope(platform: Platform, message_id: str, content: str) -> dict[str, object]:
    agent, room, user = seeded(platform)
    return {
        "event_type": "message_created",
        "agent_id": agent,
        "room_id": room,
        "payload": {
            "id": message_id,
            "content": content,
            "message_type": "text",
            "sender_type": "User",
            "sender_id": user,
            "inserted_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z",
        },
        "forwarded_at": "2026-12-01T00:00:00Z",
    }


async def test_host(platform: Platform) -> None:
    _, room, user = seeded(platform)
    failing = {kind: platform.post_message(room, user, f"raise {kind}") for kind in KINDS}
    after = platform.post_message(room, user, "still there?")
    argv = ["host", "--adapter", "base_exits:raises", "--listen", "127.0.0.1:0"]
    with trio.fail_after(DEADLINE):
        async with command(*argv, env=identity_env(platform)) as cmd:
            url = (await cmd.line("serving on")).rsplit(" ", 1)[1]
            async with httpx2.AsyncClient(timeout=DEADLINE) as client:
                for kind, message in failing.items():
                    answer = await client.post(url, json=envelope(platform, message, kind))
                    assert (answer.status_code, answer.json()) == (200, {"outcome": "failed"})
                answer = await client.post(url, json=envelope(platform, after, "still there?"))
                assert (answer.status_code, answer.json()) == (200, {"outcome": "processed"})
            assert await cmd.stop() == 0, cmd.err.decode()
    assert [status(platform, m) for m in failing.values()] == ["failed"] * 3
    assert status(platform, after) == "processed"


async def test_runs_api() -> None:
    argv = ["runs-api", "--adapter", "base_exits:raises", "--port", "0"]
    with trio.fail_after(DEADLINE):
        async with command(*argv, env={"BAND_RUNS_API_KEY": KEY}) as cmd:
            stdout = cmd.process.stdout
            assert stdout is not None
            said = b""
            while b"listening on" not in said:
                said += await stdout.receive_some()
            url = said.decode().split("listening on ", 1)[1].split()[0]
            headers = {"authorization": f"Bearer {KEY}"}
            async with httpx2.AsyncClient(base_url=url, headers=headers) as client:
                ended = []
                for text in [f"raise {kind}" for kind in KINDS] + ["still there?"]:
                    started = await client.post("/v1/runs", json={"input": text})
                    run_id = started.json()["run_id"]
                    await client.post(f"/v1/runs/{run_id}/stop?wait=true", json={})
                    ended.append((await client.get(f"/v1/runs/{run_id}")).json())
            assert [run["status"] for run in ended[:3]] == ["failed"] * 3
            assert ended[0]["error"] == "SystemExit: 3"
            assert ended[3]["status"] in ("completed", "cancelled")  # the server went on
            assert await cmd.stop() == 0, cmd.err.decode()


async def test_conformance() -> None:
    """Every probe's turn raises one of the three, in turn: each probe is a failed row."""
    with trio.fail_after(120):
        done = await trio.run_process(
            [sys.executable, "-m", "band_trio", "conformance", "base_exits:always"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=HERE,
        )
    out = done.stdout.decode()
    assert done.returncode == 1, (out, done.stderr.decode())
    assert "| interrupt mid-work | failed |" in out  # a failed row, not a crash
    assert "probes passed or do not apply" in out


REAL_CTRL_C = """
import sys, trio
from band_trio import Adapter, Agent, Turn

class Busy(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        print("busy", flush=True)
        while True:  # mostly in the adapter's own code: where a Ctrl-C lands
            for _ in range(10**6):
                pass
            await trio.sleep(0)

agent_id, key, rest, ws = sys.argv[1:5]
trio.run(Agent(Busy(), agent_id=agent_id, api_key=key, rest_url=rest, ws_url=ws).run)
"""


async def test_a_real_ctrl_c_still_stops_a_program_running_an_agent(platform: Platform) -> None:
    info = platform.info
    _, room, user = seeded(platform)
    argv = [info.agent_id or "", info.api_key or "", info.rest_url, info.ws_url]
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", REAL_CTRL_C, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with trio.fail_after(DEADLINE):
            platform.post_message(room, user, "work")
            assert process.stdout is not None
            said = b""
            while b"busy" not in said:
                said += await process.stdout.receive_some()
            process.send_signal(signal.SIGINT)
            assert await process.wait() != 0
            assert process.stderr is not None
            err = b""
            while chunk := await process.stderr.receive_some():
                err += chunk
            assert b"KeyboardInterrupt" in err
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
