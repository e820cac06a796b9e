"""RSS of `band-trio agent` and `band-trio bridge` when a peer's answer never ends.

    .venv/bin/python benchmarks/endless_bodies.py [--seconds 10] [--ceiling-mib 1024]
                                                  [--agent-src DIR]

Two scenarios, each with the project's fault-injecting proxy sending an endless
body (64 KiB chunks as fast as the client reads, up to `--ceiling-mib`, then
silence):

* agent: `band-trio agent --rest-url` at the proxy in front of the embedded
  platform, whose `GET /me` answer is the endless body;
* bridge: `band-trio bridge` with an HTTP target at the proxy, which answers every
  forward 500 with an endless body; one message is posted.

The process's VmRSS is sampled every 0.1 s from /proc for `--seconds` (or until
it exits); the table gives the peak, the last sample, the bytes the proxy sent,
and how the process ended. `--agent-src DIR` runs the processes from another
source tree (the main checkout's `src`, for the before figures).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from band_trio.platform import Platform, open_platform
from peers import Peer, fault_proxy, plan

MIB = 1024 * 1024


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


async def watch(args: list[str], env: dict[str, str], seconds: float) -> dict[str, Any]:
    """Run `band-trio ARGS`, sample its RSS, stop it by its pid after `seconds`."""
    environ = {**os.environ, **env}
    with tempfile.TemporaryFile() as err:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "band_trio", *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=environ,
        )
        peak = last = 0
        with trio.move_on_after(seconds):
            while proc.poll() is None:
                last = rss_kib(proc.pid) or last
                peak = max(peak, last)
                await trio.sleep(0.1)
        exited = proc.returncode
        if exited is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
        err.seek(0)
        tail = err.read().decode("utf-8", "replace").strip().splitlines()[-1:]
    return {
        "peak_mib": round(peak / 1024),
        "last_mib": round(last / 1024),
        "ended": f"exit {exited}" if exited is not None else f"still running after {seconds:g} s",
        "said": tail[0][:160] if tail else "",
    }


def sent_mib(proxy: Peer) -> int:
    ends = [e.get("sent", 0) for e in proxy.events("response_end") if e["how"] == "endless"]
    return round(sum(ends) / MIB) if ends else -1  # -1: still sending or stalled


async def agent_case(platform: Platform, args: argparse.Namespace, env: dict[str, str]) -> Any:
    info = platform.info
    assert info.agent_id and info.api_key
    ceiling = args.ceiling_mib * MIB
    async with fault_proxy(info.rest_url, endless_ceiling=ceiling) as proxy:
        await plan(proxy, "GET /api/v1/agent/me", [{"status": 200, "endless": True}])
        run_env = {
            **env,
            "BAND_REST_URL": proxy.base_url,
            "BAND_WS_URL": info.ws_url,
            "BAND_AGENT_ID": info.agent_id,
            "BAND_API_KEY": info.api_key,
        }
        result = await watch(["agent"], run_env, args.seconds)
        result["proxy_sent_mib"] = sent_mib(proxy)
    return result


async def bridge_case(platform: Platform, args: argparse.Namespace, env: dict[str, str]) -> Any:
    info = platform.info
    assert info.agent_id and info.api_key and info.room_id and info.user_id
    async with fault_proxy(endless_ceiling=args.ceiling_mib * MIB) as target:
        await plan(target, "POST", [{"status": 500, "endless": True}] * 1000)
        config = {
            "bridge": {"rest_url": info.rest_url, "ws_url": info.ws_url},
            "identity": [
                {
                    "agent_id": info.agent_id,
                    "api_key": info.api_key,
                    "target": {"type": "http", "url": target.base_url + "/hook"},
                }
            ],
        }
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
            json.dump(config, file)
        try:
            platform.post_message(info.room_id, info.user_id, "to a target that never ends")
            result = await watch(["bridge", "--config", file.name], env, args.seconds)
        finally:
            os.unlink(file.name)
        result["proxy_sent_mib"] = sent_mib(target)
    return result


async def main(args: argparse.Namespace) -> dict[str, Any]:
    env = {"PYTHONPATH": args.agent_src} if args.agent_src else {}
    results = {}
    async with open_platform(seed=True) as platform:
        results["agent --rest-url at an endless body"] = await agent_case(platform, args, env)
    async with open_platform(seed=True) as platform:
        results["bridge, HTTP target 500 + endless body"] = await bridge_case(platform, args, env)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--ceiling-mib", type=int, default=1024)
    parser.add_argument("--agent-src", default="")
    args = parser.parse_args()
    found = trio.run(main, args)
    print("| case | peak RSS MiB | last MiB | proxy sent MiB | ended | said |")
    print("|---|---:|---:|---:|---|---|")
    for case, r in found.items():
        print(
            f"| {case} | {r['peak_mib']} | {r['last_mib']} | {r['proxy_sent_mib']} |"
            f" {r['ended']} | {r['said']} |"
        )
