"""Attack the platform's websocket backpressure (issue 38, item 6): clients that read
fast, slowly, halfway, not at all, alone and many at once, against `band-trio platform`
with its defaults (or `--outbound-queue N`) in a process of its own.

    .venv/bin/python benchmarks/socket_backpressure.py [--frames 100000] [--clients 20]
        [--outbound-queue N]

Each scenario prints what it saw: replies got, whether the socket was cut off and how
long after the client stopped reading, a bystander agent's heartbeat round trips
meanwhile (the other sockets must go on), and the platform's resident memory (VmRSS
now, VmHWM its peak) read from /proc.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import trio
import wsproto
import wsproto.events as ev
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url


def memory(pid: int) -> str:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) // 1024
    return f"platform RSS {fields['VmRSS']} MiB (peak {fields['VmHWM']} MiB)"


class Platform:
    def __init__(self, info: dict[str, Any], pid: int) -> None:
        self.info = info
        self.pid = pid
        self.admin = info["admin_url"]

    async def agent(self, client: httpx2.AsyncClient) -> tuple[str, str]:
        made = (await client.post(f"{self.admin}/agents", json={})).json()
        room = self.info["room_id"]
        await client.post(f"{self.admin}/rooms/{room}/participants", json={"id": made["id"]})
        return made["id"], made["api_key"]

    async def stats(self, client: httpx2.AsyncClient) -> dict[str, int]:
        stats: dict[str, int] = (await client.get(f"{self.admin}/stats")).json()
        return stats


def url(p: Platform, agent: str) -> str:
    return f"{p.info['ws_url']}?vsn=2.0.0&agent_id={agent}"


async def reader(
    p: Platform,
    agent: str,
    key: str,
    frames: int,
    *,
    ref_size: int = 0,
    pause_every: int = 0,
    stop_after: int | None = None,
    seen: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Pipeline `frames` heartbeats and read the replies (all, slowly, or `stop_after`)."""
    pad = "r" * ref_size
    got = 0
    closed: str | None = None
    stopped_at: float | None = None
    began = time.perf_counter()
    headers = [(b"x-api-key", key.encode())]
    try:
        async with open_websocket_url(
            url(p, agent), extra_headers=headers, message_queue_size=1, max_message_size=1 << 24
        ) as ws:

            async def pipeline(ws: WebSocketConnection) -> None:
                for n in range(frames):
                    await ws.send_message(f'[null,"{n}{pad}","phoenix","heartbeat",{{}}]')

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pipeline, ws)
                while got < frames:
                    if stop_after is not None and got == stop_after:
                        stopped_at = time.perf_counter()
                        if seen is not None:
                            seen["stopped_at"] = stopped_at
                        await trio.sleep_forever()  # cancelled by the scenario
                    await ws.get_message()
                    got += 1
                    if pause_every and got % pause_every == 0:
                        await trio.sleep(0.001)
                nursery.cancel_scope.cancel()
    except* ConnectionClosed as group:
        reason = group.exceptions[0].reason  # type: ignore[attr-defined]
        closed = f"{reason.code} {reason.name}"
    return {
        "got": got,
        "of": frames,
        "closed": closed,
        "seconds": round(time.perf_counter() - began, 2),
        "stopped_at": stopped_at,
    }


async def non_reader(
    p: Platform, agent: str, key: str, frames: int, ref_size: int
) -> tuple[int, float]:
    """A websocket that sends `frames` heartbeats and reads nothing: how many it got to
    send, and how long after its first it was cut off (its sends broke)."""
    port = int(p.info["rest_url"].rsplit(":", 1)[1])
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    sent = 0
    try:
        conn = wsproto.WSConnection(wsproto.ConnectionType.CLIENT)
        target = f"/api/v1/socket/websocket?vsn=2.0.0&agent_id={agent}"
        request = ev.Request(
            host=f"127.0.0.1:{port}", target=target, extra_headers=[(b"x-api-key", key.encode())]
        )
        await stream.send_all(conn.send(request))
        accepted = False
        while not accepted:
            conn.receive_data(await stream.receive_some())
            accepted = any(isinstance(e, ev.AcceptConnection) for e in conn.events())
        pad = "r" * ref_size
        began = time.perf_counter()
        for n in range(frames):
            data = f'[null,"{n}{pad}","phoenix","heartbeat",{{}}]'
            await stream.send_all(conn.send(ev.TextMessage(data=data)))
            sent += 1
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return sent, time.perf_counter() - began
    finally:
        await trio.aclose_forcefully(stream)
    return sent, float("inf")  # never cut off: it sent everything


async def bystander(p: Platform, agent: str, key: str, rtts: list[float]) -> None:
    """Another agent's heartbeat round trips, one every 50 ms, until cancelled."""
    headers = [(b"x-api-key", key.encode())]
    async with open_websocket_url(url(p, agent), extra_headers=headers) as ws:
        n = 0
        while True:
            t = time.perf_counter()
            await ws.send_message(f'[null,"b{n}","phoenix","heartbeat",{{}}]')
            await ws.get_message()
            rtts.append((time.perf_counter() - t) * 1000)
            n += 1
            await trio.sleep(0.05)


def rtt_line(rtts: list[float]) -> str:
    if not rtts:
        return "bystander: no round trip"
    q = statistics.quantiles(rtts, n=100) if len(rtts) > 1 else rtts * 99
    spread = f"p50={q[49]:.2f} p99={q[98]:.2f} max={max(rtts):.2f}"
    return f"bystander heartbeat RTT ms: n={len(rtts)} {spread}"


async def until_stat(p: Platform, client: httpx2.AsyncClient, name: str, value: int) -> float:
    began = time.perf_counter()
    # another process's counters, over HTTP: there is nothing to wait on but the next look
    while (await p.stats(client))[name] < value:  # noqa: ASYNC110
        await trio.sleep(0.05)
    return time.perf_counter() - began


async def scenarios(p: Platform, frames: int, clients: int) -> None:
    async with httpx2.AsyncClient(timeout=30) as client:
        rtts: list[float] = []
        by_id, by_key = await p.agent(client)
        async with trio.open_nursery() as watch:
            watch.start_soon(bystander, p, by_id, by_key, rtts)

            print(f"\n# A. one client pipelines {frames:,} heartbeats and reads every reply")
            agent, key = await p.agent(client)
            print(await reader(p, agent, key, frames), "|", memory(p.pid))

            print(f"\n# B. one slow reader: {frames // 5:,} heartbeats, 1 ms pause every 50 read")
            agent, key = await p.agent(client)
            print(await reader(p, agent, key, frames // 5, pause_every=50), "|", memory(p.pid))

            print(f"\n# C. one client pipelines {frames:,} heartbeats (16 KiB refs), stops at half")
            agent, key = await p.agent(client)
            before = (await p.stats(client))["connections_closed"]
            seen: dict[str, float] = {}

            async def halfway() -> None:
                await reader(
                    p, agent, key, frames, ref_size=16384, stop_after=frames // 2, seen=seen
                )

            async with trio.open_nursery() as nursery:
                nursery.start_soon(halfway)
                await until_stat(p, client, "connections_closed", before + 1)
                cut = time.perf_counter()
                nursery.cancel_scope.cancel()
            stopped = seen.get("stopped_at")
            said = f"cut off {cut - stopped:.2f} s after it stopped reading" if stopped else "?"
            print(said, "|", memory(p.pid))

            print(f"\n# D. {clients} clients at once: half read {frames // 2:,} each, half nothing")
            made = [await p.agent(client) for _ in range(clients)]
            outcomes: list[dict[str, Any]] = []
            cuts: list[tuple[int, float]] = []

            async def one_reader(agent: str, key: str) -> None:
                outcomes.append(await reader(p, agent, key, frames // 2))

            async def one_stuck(agent: str, key: str) -> None:
                cuts.append(await non_reader(p, agent, key, frames, 4096))

            async with trio.open_nursery() as nursery:
                for i, (agent, key) in enumerate(made):
                    nursery.start_soon(one_reader if i % 2 == 0 else one_stuck, agent, key)
            print(
                f"the {len(cuts)} non-readers sent {[sent for sent, _ in cuts]} frames and were",
                f"cut off after {[round(t, 1) for _, t in cuts]} s;",
                f"the readers got {sum(r['got'] for r in outcomes):,}",
                f"of {sum(r['of'] for r in outcomes):,} replies in at most",
                f"{max(r['seconds'] for r in outcomes)} s, closed: "
                f"{[r['closed'] for r in outcomes if r['closed']]} |",
                memory(p.pid),
            )
            watch.cancel_scope.cancel()
        print("\n" + rtt_line(rtts))
        stats = await p.stats(client)
        keys = ("socket_backpressure", "sockets_stalled", "sockets_overflowed", "clients_stalled")
        print({k: stats[k] for k in keys})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--outbound-queue", type=int)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        ready = Path(folder) / "ready.json"
        command = [sys.executable, "-m", "band_trio", "platform", "--seed"]
        command += ["--ready-file", str(ready)]
        if args.outbound_queue:
            command += ["--outbound-queue", str(args.outbound_queue)]
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while not ready.exists():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the platform did not start")
                time.sleep(0.05)
            platform = Platform(json.loads(ready.read_text()), proc.pid)
            print(memory(proc.pid), "at start")
            trio.run(scenarios, platform, args.frames, args.clients)
        finally:
            os.kill(proc.pid, 15)
            proc.wait(10)


if __name__ == "__main__":
    main()
