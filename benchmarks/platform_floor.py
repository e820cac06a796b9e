"""The embedded platform's own overhead against a bare hypercorn app, in one run.

    .venv/bin/python benchmarks/platform_floor.py [--pushes 500] [--requests 500]
        [--pause 0.001] [--waiters]

Both servers (a bare hypercorn ASGI app on the trio worker, and the embedded
platform, same hypercorn) run in this process; the client runs in a subprocess
(this script with `--client`), as an agent would. Every push and every request
alternates between the two, so drift of this noisy VM hits both alike.
`time.perf_counter()` is CLOCK_MONOTONIC, so stamps compare across processes.

* push: the server stamps a frame just before handing it to hypercorn (the
  platform's own `ws_out` log stamp; the bare app's stamp at the same point),
  the client stamps its receipt. One push at a time: the next goes after the
  client has reported the previous one, plus a short pause.
* REST: sequential requests, one keep-alive httpx2 connection per server, the client
  stamping around each. The server's entry stamp (the platform's `rest` log
  stamp, the bare app's own) splits a round trip into client → server entry
  ("up") and server entry → client ("down"); the platform's own work is in
  "down".

The platform's part of a round trip is judged as the platform's median minus
the bare app's median on the same kind of request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

from band_trio.platform import Platform

WARMUP = 50
CONTROL_FRAME = (
    '["1",null,"agent_control:x","agent.control",{"mode":"interrupt","scope":"room",'
    '"agent_id":"x","correlation_id":"ctl-0123456789abcdef0123456789abcdef",'
    '"execution_id":"00000000-0000-0000-0000-000000000000","room_id":"r",'
    '"type":"agent.control"}]'
)


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def row(name: str, samples: list[float]) -> str:
    ms = [s * 1000 for s in samples]
    return f"| {name} | {len(ms)} | {statistics.median(ms):.3f} | {pct(ms, 0.9):.3f} |"


# -- the client (a subprocess) -------------------------------------------------


async def client(config: dict[str, Any]) -> None:
    """Open one websocket per server, report each push's receipt, then run the requests."""
    import httpx2
    import trio_websocket

    out = sys.stdout
    async with trio.open_nursery() as nursery:
        sockets = []
        for server in config["servers"]:
            headers = [(b"x-api-key", server["api_key"].encode())]
            ws = await trio_websocket.connect_websocket_url(
                nursery, server["ws_url"] + "?vsn=2.0.0", extra_headers=headers
            )
            if server.get("join"):
                await ws.send_message(json.dumps(["1", "1", server["join"], "phx_join", {}]))
                await ws.get_message()  # the phx_reply
            sockets.append(ws)
        out.write("ready\n")
        out.flush()
        for _ in range(config["pushes"]):
            for ws in sockets:
                await ws.get_message()
                out.write(f"{time.perf_counter()!r}\n")
                out.flush()
        for ws in sockets:
            await ws.aclose()
    results: dict[str, list[tuple[float, float]]] = {}
    async with httpx2.AsyncClient() as http:
        for name, method, url, key in config["requests"]:
            stamps = results.setdefault(name, [])
            t0 = time.perf_counter()
            response = await http.request(method, url, headers={"x-api-key": key})
            t1 = time.perf_counter()
            if response.status_code >= 400:
                raise RuntimeError(f"{name}: {response.status_code} {response.text}")
            stamps.append((t0, t1))
    out.write(json.dumps(results) + "\n")
    out.flush()


# -- the servers -----------------------------------------------------------------


class Bare:
    """A bare hypercorn ASGI app: a websocket that pushes on demand, HTTP answering JSON."""

    BODY = b'{"data":{"id":"m","status":"processed","attempt_number":1,"success":true}}'

    def __init__(self) -> None:
        self.wake, self._woken = trio.open_memory_channel[None](1)
        self.push_stamps: list[float] = []
        self.entries: list[float] = []

    def push(self) -> None:
        self.wake.send_nowait(None)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.accept"})
            async for _ in self._woken:
                self.push_stamps.append(time.perf_counter())
                await send({"type": "websocket.send", "text": CONTROL_FRAME})
        elif scope["type"] == "http":
            self.entries.append(time.perf_counter())
            while (await receive()).get("more_body"):
                pass
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(self.BODY)).encode()),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": self.BODY})
        elif scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})


class Client:
    """The client subprocess: its config on stdin, its stamps on stdout, line by line."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--client"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(config) + "\n")
        self.proc.stdin.close()

    async def line(self) -> str:
        assert self.proc.stdout
        return await trio.to_thread.run_sync(self.proc.stdout.readline)


def sent_since(p: Platform, seq: int) -> bool:
    return any(entry.kind == "ws_out" for entry in p.log(seq))


def control_stamp(p: Platform, seq: int) -> float:
    for entry in p.log(seq):
        if entry.kind == "ws_out" and entry.frame and '"agent.control"' in entry.frame:
            return entry.t
    raise RuntimeError("no ws_out entry for the control")


@dataclass(frozen=True)
class Options:
    pushes: int = 500
    requests: int = 500
    pause: float = 0.001
    """Seconds between two pushes. The idle gap matters on a VM: after ~10 ms idle,
    waking the receiver costs ~0.3 ms more, bare hypercorn or platform alike."""
    waiters: bool = False
    """Also wait for the `ws_out` entry with `Platform.wait_until`, as the stop
    benchmarks do (a task the frame's log entry wakes)."""


async def measure(p: Platform, bare: Bare, bare_base: str, options: Options) -> list[str]:
    info = p.info
    assert info.agent_id and info.api_key and info.room_id and info.user_id
    agent, room, key = info.agent_id, info.room_id, info.api_key
    n = options.requests + WARMUP
    ids = [p.post_message(room, info.user_id, "x") for _ in range(n)]
    chat = f"{info.rest_url}/api/v1/agent/chats/{room}"
    # Each platform request is followed by the same method against the bare app.
    routes: list[tuple[str, str, str]] = []
    routes += [("me", "GET", f"{info.rest_url}/api/v1/agent/me")] * n
    routes += [("next (200)", "GET", f"{chat}/messages/next")] * n
    for m in ids:
        routes.append(("processing", "POST", f"{chat}/messages/{m}/processing"))
        routes.append(("processed", "POST", f"{chat}/messages/{m}/processed"))
    routes += [("next (204)", "GET", f"{chat}/messages/next")] * n
    requests = []
    for name, method, url in routes:
        requests.append((name, method, url, key))
        requests.append((f"bare {method} ({name})", method, f"{bare_base}/x", "k"))
    since = p.request_log.next_seq
    client = Client(
        {
            "servers": [
                {"ws_url": info.ws_url, "api_key": key, "join": f"agent_control:{agent}"},
                {"ws_url": bare_base.replace("http", "ws") + "/ws", "api_key": "k"},
            ],
            "pushes": options.pushes + WARMUP,
            "requests": requests,
        }
    )
    assert await client.line() == "ready\n"
    platform_push: list[float] = []
    bare_push: list[float] = []
    for i in range(options.pushes + WARMUP):
        seq = p.request_log.next_seq
        p.send_control(agent, "interrupt", room_id=room)
        if options.waiters:  # as the stop benchmarks do: a task waiting for the frame's log entry
            await p.wait_until(partial(sent_since, p, seq))
        received = float(await client.line())
        if i >= WARMUP:
            platform_push.append(received - control_stamp(p, seq))
        await trio.sleep(options.pause)
        bare.push()
        received = float(await client.line())
        if i >= WARMUP:
            bare_push.append(received - bare.push_stamps[-1])
        await trio.sleep(options.pause)
    lines = [row("push, bare hypercorn", bare_push), row("push, platform", platform_push)]
    rest: dict[str, list[list[float]]] = json.loads(await client.line())
    entries: dict[str, list[float]] = {}
    names = iter(name for name, *_ in requests if not name.startswith("bare"))
    for entry in p.log(since):
        if entry.kind == "rest":
            entries.setdefault(next(names), []).append(entry.t)
    bare_names = iter(name for name, *_ in requests if name.startswith("bare"))
    for t in bare.entries:
        entries.setdefault(next(bare_names), []).append(t)
    for name in dict.fromkeys(name for name, *_ in routes):
        bare_label = next(n for n in rest if n.endswith(f"({name})"))
        for label in (bare_label, name):
            stamps = rest[label][WARMUP:]
            pairs = list(zip(stamps, entries[label][WARMUP:], strict=True))
            lines.append(row(f"{label}: round trip", [t1 - t0 for t0, t1 in stamps]))
            lines.append(row(f"{label}: up", [e - t0 for (t0, _), e in pairs]))
            lines.append(row(f"{label}: down", [t1 - e for (_, t1), e in pairs]))
        both = zip(rest[name][WARMUP:], rest[bare_label][WARMUP:], strict=True)
        own = [(p1 - p0) - (b1 - b0) for (p0, p1), (b0, b1) in both]
        lines.append(row(f"{name}: platform - bare, paired", own))
    client.proc.wait()
    return lines


async def main(options: Options) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from band_trio.platform import open_platform

    bare = Bare()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, bare, config, shutdown_trigger=stop.wait))
        async with open_platform(seed=True) as p:
            lines = await measure(p, bare, binds[0], options)
        stop.set()
    print("| path | n | p50 ms | p90 ms |\n|---|---:|---:|---:|")
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pushes", type=int, default=500)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--pause", type=float, default=0.001, help="seconds between pushes")
    parser.add_argument("--waiters", action="store_true", help="wait_until the ws_out entry")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        trio.run(client, json.loads(sys.stdin.readline()))
    else:
        trio.run(main, Options(args.pushes, args.requests, args.pause, args.waiters))
