"""An agent in N rooms against `band-trio platform` as a user would start it (issue 38,
item 6): does it join, how long does it take, and what did the platform do?

    .venv/bin/python benchmarks/join_at_scale.py --rooms 10000 [--platform-src DIR]
        [--agent-src DIR] [--outbound-queue N] [--deadline 120]

The platform and the agent are two `band-trio` processes (`platform --seed`, `agent
--adapter band_trio.adapters:demo --log-level INFO`), each from the source tree given
(default: this one), so an old tree can be set against a new one. The rooms are made
through the admin API before the agent starts. It prints the time from the agent's
launch to its "joined N room(s)" line, the closes and reconnects the agent logged, and
the platform's socket counters. Both processes are stopped by their PID.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

HERE = Path(__file__).resolve().parent.parent / "src"


def start(src: Path, *args: str, **kwargs: object) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(src), **kwargs.pop("env", {})}  # type: ignore[dict-item]
    return subprocess.Popen([sys.executable, "-m", "band_trio", *args], env=env, **kwargs)  # type: ignore[call-overload]


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rooms", type=int, default=10_000)
    parser.add_argument("--platform-src", type=Path, default=HERE)
    parser.add_argument("--agent-src", type=Path, default=HERE)
    parser.add_argument("--outbound-queue", type=int)
    parser.add_argument("--deadline", type=float, default=120.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        ready = Path(folder) / "ready.json"
        command = ["platform", "--seed", "--ready-file", str(ready)]
        if args.outbound_queue:
            command += ["--outbound-queue", str(args.outbound_queue)]
        platform = start(args.platform_src, *command, stdout=subprocess.DEVNULL)
        agent: subprocess.Popen[bytes] | None = None
        try:
            limit = time.monotonic() + 20
            while not ready.exists():
                if time.monotonic() > limit or platform.poll() is not None:
                    raise SystemExit("the platform did not start")
                time.sleep(0.05)
            info = json.loads(ready.read_text())
            admin = info["admin_url"]
            made = time.perf_counter()
            with httpx2.Client(timeout=30) as client:
                for i in range(args.rooms - 1):  # the seeded room is the first
                    client.post(
                        f"{admin}/rooms",
                        json={"title": f"r{i}", "participants": [info["agent_id"]]},
                    ).raise_for_status()
                print(f"{args.rooms} rooms made in {time.perf_counter() - made:.1f} s")
                env = {
                    "BAND_REST_URL": info["rest_url"],
                    "BAND_WS_URL": info["ws_url"],
                    "BAND_AGENT_ID": info["agent_id"],
                    "BAND_API_KEY": info["api_key"],
                }
                launched = time.perf_counter()
                agent = start(
                    args.agent_src,
                    "--log-level", "INFO", "agent", "--adapter", "band_trio.adapters:demo",
                    env=env, stderr=subprocess.PIPE,
                )  # fmt: skip
                assert agent.stderr is not None
                os.set_blocking(agent.stderr.fileno(), False)
                lines: list[str] = []
                buffered = b""
                joined_at: float | None = None
                while joined_at is None and time.perf_counter() - launched < args.deadline:
                    chunk = agent.stderr.read() or b""
                    buffered += chunk
                    *complete, buffered = buffered.split(b"\n")
                    for raw in complete:
                        line = raw.decode(errors="replace")
                        lines.append(line)
                        if f"joined {args.rooms} room(s) of {args.rooms}" in line:
                            joined_at = time.perf_counter()
                    if agent.poll() is not None:
                        break
                    if not chunk:
                        time.sleep(0.02)  # another process's stderr: nothing to wait on
                stats = client.get(f"{admin}/stats").json()
            closes = [line for line in lines if "websocket closed" in line]
            if joined_at is None:
                print(f"NOT joined within {args.deadline:.0f} s")
            else:
                print(f"launched → all {args.rooms} rooms joined: {joined_at - launched:.2f} s")
            print(f"websocket closes the agent logged: {len(closes)}", *closes[:3], sep="\n  ")
            keys = (
                "connections_opened", "socket_backpressure", "sockets_stalled",
                "sockets_overflowed", "clients_stalled", "joins_refused",
            )  # fmt: skip
            print({k: stats.get(k) for k in keys})
        finally:
            if agent is not None:
                stop(agent)
            stop(platform)


if __name__ == "__main__":
    main()
