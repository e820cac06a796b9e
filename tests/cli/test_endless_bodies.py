"""Endless bodies from a "platform" and from a bridge's target, over real processes.

`band-trio agent --rest-url` at a server whose answer never ends grew to 3.9 GB;
a bridge whose HTTP target answered 500 with an endless body to 2.4 GB. Here the
project's fault-injecting proxy serves such bodies (up to a ceiling, then silence,
so the old code holds at most that much and waits); each process runs under a
small wrapper that reports its peak RSS (`ru_maxrss` of its only child) and
passes signals on to it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import trio

from band_trio.platform import Platform
from peers import fault_proxy, plan
from support import agent_env, seeded, status

DEADLINE = 30
CEILING = 256 * 1024 * 1024
"""What the proxy sends of an endless body before it falls silent (the old code's bound)."""
PEAK_LIMIT_KB = 200 * 1024
"""The peak RSS allowed: the process itself (~80 MB) and one bounded read."""

_PEAK = (
    "import resource, signal, subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:])\n"
    "for signum in (signal.SIGTERM, signal.SIGINT):\n"
    "    signal.signal(signum, lambda n, _: child.send_signal(n))\n"
    "code = child.wait()\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "print(f'peak-rss-kb={peak}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


async def with_peak(*args: str, env: dict[str, str], stderr: Path) -> trio.Process:
    """`band-trio ARGS` under the peak-RSS wrapper, its stderr to a file (never a pipe
    that fills up while the test waits for something else)."""
    band_trio = [sys.executable, "-m", "band_trio"]
    with stderr.open("wb") as sink:
        return await trio.lowlevel.open_process(
            [sys.executable, "-c", _PEAK, *band_trio, *args],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={**os.environ, **env},
            start_new_session=True,  # its own process group: `stop` ends the child with it
        )


async def finish(proc: trio.Process, stderr: Path) -> tuple[int, str, int]:
    """Its exit status, its stderr, and the child's peak RSS in KiB."""
    code = await proc.wait()
    text = await trio.Path(stderr).read_text("utf-8", "replace")
    peak = int(text.rsplit("peak-rss-kb=", 1)[1].split()[0])
    return code, text, peak


async def stop(proc: trio.Process) -> None:
    """End the wrapper and its child by their process group (the wrapper's pid, signalled
    only while the wrapper is not reaped, so never a reused pid): SIGTERM, then SIGKILL to
    both 10 s later. The wrapper exits only after its child, so a reaped one left none."""
    if proc.returncode is not None:
        return
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with trio.move_on_after(10):
        await proc.wait()
    if proc.returncode is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def test_an_agent_at_a_platform_with_an_endless_body_exits_naming_the_limit(
    platform: Platform, tmp_path: Path
) -> None:
    log = tmp_path / "agent.stderr"
    with trio.fail_after(DEADLINE):
        async with fault_proxy(platform.info.rest_url, endless_ceiling=CEILING) as proxy:
            await plan(proxy, "GET /api/v1/agent/me", [{"status": 200, "endless": True}])
            env = {**agent_env(platform), "BAND_REST_URL": proxy.base_url}
            proc = await with_peak("agent", env=env, stderr=log)
            try:
                code, err, peak = await finish(proc, log)
            finally:
                await stop(proc)
            [sent] = [e["sent"] for e in proxy.events("response_end") if e["how"] == "endless"]
    assert code == 1, err
    assert "67108864-byte limit" in err and "Traceback" not in err, err
    assert sent < CEILING  # it stopped reading and dropped the connection
    assert peak < PEAK_LIMIT_KB, f"peak RSS {peak} KiB"
    print(f"agent: peak RSS {peak / 1024:.0f} MiB, read {sent / 2**20:.0f} MiB of the body")


async def test_a_bridge_whose_target_answers_500_with_an_endless_body_stays_small(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room, user = seeded(platform)
    info = platform.info
    async with fault_proxy(endless_ceiling=CEILING) as target:
        await plan(target, "POST", [{"status": 500, "endless": True}] * 100)
        config = tmp_path / "bridge.json"
        config.write_text(
            json.dumps(
                {
                    "bridge": {
                        "rest_url": info.rest_url,
                        "ws_url": info.ws_url,
                        "policy": {"retry_first": 0.05, "retry_max": 0.2},
                    },
                    "identity": [
                        {
                            "agent_id": agent_id,
                            "api_key": info.api_key,
                            "target": {"type": "http", "url": target.base_url + "/hook"},
                        }
                    ],
                }
            )
        )
        env = {"BAND_UPSTREAM_RETRY_BASE": "0.01", "BAND_UPSTREAM_RETRY_CAP": "0.05"}
        log = tmp_path / "bridge.stderr"
        proc = await with_peak("bridge", "--config", str(config), env=env, stderr=log)
        try:
            with trio.fail_after(DEADLINE):
                await platform.wait_until(lambda: agent_id in platform.connected_agents())
                message = platform.post_message(room, user, "to a target that never ends")
                # five forwards of three attempts each, then the bridge gives the message up
                await platform.wait_until(lambda: status(platform, message) == "failed")
                await target.wait_for(lambda e: e["n"] == 15, event="response_end", timeout=10)
                ended = [e for e in target.events("response_end") if e["how"] == "endless"]
                proc.terminate()
                code, err, peak = await finish(proc, log)
        finally:
            await stop(proc)
    assert code == 0, err
    assert len(ended) == 15  # each answer dropped unread past the limit, none held
    assert max(e["sent"] for e in ended) < CEILING
    assert peak < PEAK_LIMIT_KB, f"peak RSS {peak} KiB"
    print(f"bridge: peak RSS {peak / 1024:.0f} MiB after {len(ended)} endless answers")
