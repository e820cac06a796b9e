"""An adapter that raises `SystemExit`, `KeyboardInterrupt` or `GeneratorExit` fails its
turn, and the process goes on: `band-trio agent`, `host`, `runs-api` and `conformance`,
each a real process (issue 21, item 8). A real Ctrl-C still stops a program that
runs an agent.

Before: under `runs-api` one run's `sys.exit(3)` ended the server (and lost an
unrelated run), under `band-trio agent` the agent died, and `conformance` printed
a traceback instead of a failed row.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio

from band_trio.platform import Platform
from support import (
    HOST_TOKEN,
    agent_env,
    band_trio,
    conformance,
    envelope,
    replies,
    seeded,
    status,
)

HERE = Path(__file__).resolve().parent
DEADLINE = 30
KINDS = ["SystemExit", "KeyboardInterrupt", "GeneratorExit"]
KEY = "a-runs-api-key-of-16+"


async def test_agent(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        env = agent_env(platform)
        argv = ["agent", "--adapter", "base_exits:raises"]
        async with band_trio(*argv, env=env, cwd=HERE) as cmd:
            await platform.wait_until(lambda: bool(platform.connected_agents()))
            failing = [platform.post_message(room, user, f"raise {kind}") for kind in KINDS]
            await platform.wait_until(
                lambda: [status(platform, m) for m in failing] == ["failed"] * 3
            )
            after = platform.post_message(room, user, "still there?")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            assert await cmd.stop() == 0, cmd.err.decode()
    assert replies(platform, room) == ["echo: still there?"]


async def test_host(platform: Platform) -> None:
    _, room, user = seeded(platform)
    failing = {kind: platform.post_message(room, user, f"raise {kind}") for kind in KINDS}
    after = platform.post_message(room, user, "still there?")
    argv = ["host", "--adapter", "base_exits:raises", "--listen", "127.0.0.1:0"]
    env = {**agent_env(platform), "BAND_HOST_TOKEN": HOST_TOKEN}
    headers = {"authorization": f"Bearer {HOST_TOKEN}"}
    with trio.fail_after(DEADLINE):
        async with band_trio(*argv, env=env, cwd=HERE) as cmd:
            url = (await cmd.line("serving on")).rsplit(" ", 1)[1]
            async with httpx2.AsyncClient(timeout=DEADLINE, headers=headers) as client:
                for kind, message in failing.items():
                    body = envelope(platform, message, f"raise {kind}")
                    answer = await client.post(url, json=body)
                    assert (answer.status_code, answer.json()) == (422, {"outcome": "failed"})
                answer = await client.post(url, json=envelope(platform, after, "still there?"))
                assert (answer.status_code, answer.json()) == (200, {"outcome": "processed"})
            assert await cmd.stop() == 0, cmd.err.decode()
    assert [status(platform, m) for m in failing.values()] == ["failed"] * 3
    assert status(platform, after) == "processed"


async def test_runs_api() -> None:
    argv = ["runs-api", "--adapter", "base_exits:raises", "--port", "0"]
    with trio.fail_after(DEADLINE):
        async with band_trio(*argv, env={"BAND_RUNS_API_KEY": KEY}, cwd=HERE) as cmd:
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
        done = await conformance("base_exits:always", cwd=HERE)
    out = done.stdout.decode()
    assert done.returncode == 1, (out, done.stderr.decode())
    assert "| interrupt mid-work | failed |" in out  # a failed row, not a crash
    assert "the adapter finished the long prompt (raised)" in out  # the turn's failure...
    assert "the probe's run broke" not in out  # ...not a probe whose agent died under it
    assert re.search(r"\d+ probes: 0 passed, \d+ do not apply, \d+ failed", out)  # no crash


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
