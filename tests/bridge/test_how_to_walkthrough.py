"""docs/how-to/bridge.md's walkthrough, run as written: `band-trio platform`,
`band-trio host --token-file`, `band-trio bridge` with the page's own
bridge.toml, `band-trio ctl` — each a process of its own, on free ports instead
of 4000, 8800 and 8765. Then the host as a stranger sees it, and the host with
a refused key."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio

from ports import free_port
from support import Command

DOC = Path(__file__).parents[2] / "docs" / "how-to" / "bridge.md"
DEADLINE = 30
BAND_TRIO = [sys.executable, "-m", "band_trio"]


def _walkthrough_config() -> str:
    """The bridge.toml the page shows (its `#      ` comment lines)."""
    walkthrough = DOC.read_text().split("# 3. the bridge", 1)[1].split("DEMO_AGENT_KEY=", 1)[0]
    return "\n".join(line[len("#      ") :] for line in walkthrough.splitlines()[1:]) + "\n"


class Proc(Command):
    """A band-trio process; its stderr read on demand."""

    async def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        with trio.fail_after(DEADLINE):
            return await self.process.wait()


async def _start(folder: Path, *args: str, env: dict[str, str] | None = None) -> Proc:
    process = await trio.lowlevel.open_process(
        [*BAND_TRIO, *args],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    return Proc(process)


async def _ctl(folder: Path, *args: str) -> None:
    done = await trio.run_process(
        [*BAND_TRIO, "ctl", *args, "--ready-file", "ready.json"],
        cwd=folder,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


async def test_the_bridge_how_to_walkthrough_runs_as_written(tmp_path: Path) -> None:
    rest, host_port, health_port = free_port(), free_port(), free_port()
    (tmp_path / "host.token").write_text(secrets.token_urlsafe(32) + "\n")
    token = (tmp_path / "host.token").read_text().strip()
    procs: list[Proc] = []
    try:
        with trio.fail_after(DEADLINE):
            platform = await _start(
                tmp_path, "platform", "--seed", "--port", str(rest), "--ready-file", "ready.json"
            )
            procs.append(platform)
            while not (tmp_path / "ready.json").exists():
                await trio.sleep(0.05)  # polling a file another process writes
            info = json.loads((tmp_path / "ready.json").read_text())
            host = await _start(
                tmp_path, "--log-level", "INFO", "host",
                "--adapter", "band_trio.adapters:DemoAdapter", "--ready-file", "ready.json",
                "--listen", f"127.0.0.1:{host_port}", "--token-file", "host.token",
            )  # fmt: skip
            procs.append(host)
            await host.line("serving on")
            config = (
                _walkthrough_config()
                .replace("AGENT-ID", info["agent_id"])
                .replace("127.0.0.1:4000", f"127.0.0.1:{rest}")
                .replace("127.0.0.1:8800", f"127.0.0.1:{host_port}")
                .replace("127.0.0.1:8765", f"127.0.0.1:{health_port}")
            )
            (tmp_path / "bridge.toml").write_text(config)
            bridge = await _start(
                tmp_path, "--log-level", "INFO", "bridge", "--config", "bridge.toml",
                env={"DEMO_AGENT_KEY": info["api_key"]},
            )  # fmt: skip
            procs.append(bridge)
            ready = await bridge.line("ready:")
            assert "1 of 1 identities connected" in ready

            json_body = {"content-type": "application/json"}
            async with httpx2.AsyncClient(base_url=info["admin_url"], headers=json_body) as admin:

                async def delivery(message_id: str) -> str:
                    answer = await admin.get(f"/messages/{message_id}")
                    return str(answer.json()["delivery"][info["agent_id"]]["status"])

                posted = await admin.post(
                    f"/rooms/{info['room_id']}/messages",
                    # 6 s: the stop below starts a `band-trio ctl` process, which a busy
                    # machine took over 2 s to start (the forward had ended by then)
                    json={"sender_id": info["user_id"], "content": "sleep=6 hello"},
                )
                message_id = posted.json()["id"]
                while await delivery(message_id) != "processing":  # the host claimed it
                    await trio.sleep(0.05)  # polling another process's state
                await _ctl(tmp_path, "stop", "--room", info["room_id"])
                await bridge.line(f"forward of {message_id} ended: cancelled")
                await host.line(f"the forward of {message_id} went away")
                assert await delivery(message_id) == "processing"  # left for the replay
                await _ctl(tmp_path, "play", "--room", info["room_id"])
                while await delivery(message_id) != "processed":
                    await trio.sleep(0.05)
                room = await admin.get(f"/rooms/{info['room_id']}/messages")
                replies = [m["content"] for m in room.json() if m["sender_id"] == info["agent_id"]]
                assert replies == ["echo: sleep=6 hello"]

            async with httpx2.AsyncClient() as client:
                health = (await client.get(f"http://127.0.0.1:{health_port}/health")).json()
                (ident,) = health["identities"]
                assert ident["delivered"] == 1 and ident["failed"] == 0
                bearer = {"authorization": f"Bearer {token}"}
                url = f"http://127.0.0.1:{host_port}"
                mine = (await client.get(f"{url}/health", headers=bearer)).json()
                assert mine["outcomes"] == {"processed": 1}
                assert (await client.get(f"{url}/health")).json() == {"ok": True}
                stranger = await client.post(f"{url}/", json={})
                assert stranger.status_code == 401
                assert stranger.json()["error"]["code"] == "unauthorized"
        for proc in reversed(procs):
            assert await proc.stop() == 0
    finally:
        for proc in procs:
            if proc.process.returncode is None:
                proc.process.kill()
                await proc.process.wait()


async def test_a_host_with_a_refused_key_exits_3_and_one_without_a_token_warns(
    tmp_path: Path,
) -> None:
    rest = free_port()
    platform = await _start(
        tmp_path, "platform", "--seed", "--port", str(rest), "--ready-file", "ready.json"
    )
    try:
        with trio.fail_after(DEADLINE):
            while not (tmp_path / "ready.json").exists():
                await trio.sleep(0.05)  # polling a file another process writes
            host = await _start(
                tmp_path, "host", "--adapter", "band_trio.adapters:DemoAdapter",
                "--ready-file", "ready.json", "--api-key", "not-the-key",
                "--listen", "127.0.0.1:0", "--insecure-no-token",
            )  # fmt: skip
            assert await host.process.wait() == 3
            await host.line("WARNING: --insecure-no-token")
            refused = await host.line("the platform refused the key")
            assert "unauthorized" in refused
            assert "Traceback" not in host.err.decode()
            assert b"serving on" not in host.err
        assert await platform.stop() == 0
    finally:
        if platform.process.returncode is None:
            platform.process.kill()
            await platform.process.wait()
