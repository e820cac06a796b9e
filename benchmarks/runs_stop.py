"""The runs API's stop, end to end: POST /stop → `run.cancelled` on the event stream, and
→ the upstream model stream closed on the model server's side.

    .venv/bin/python benchmarks/runs_stop.py --trials 30 [--json]

Three processes on one host, as a deployment has them: this client (trio, httpx2),
`band-trio runs-api --adapter band_trio.adapters:openai_chat` (hypercorn, trio), and
stubllm 0.1.5 (src/band_trio/bench/_peers/stubllm_server.py) streaming the 80-chunk
`[slow]` answer 50 ms a chunk, its events read through a FIFO as they are written.
Each trial starts a run, opens its event stream, waits until stubllm has sent 3
chunks of the run's completion, then sends `POST /v1/runs/{id}/stop`.

Every interval starts at this client's `time.perf_counter()` just before the stop
request is written, and ends at:

* the `run.cancelled` frame read from the event stream (this process);
* stubllm's own stamp of its streaming generator being cancelled (its process; the
  clocks are CLOCK_MONOTONIC on Linux, so comparable);
* the stop's answer (`?wait=true` trials: once the run has settled).

The floor, measured in the same run, interleaved with the trials: a bare REST round
trip to the same server on the same kept-alive connection (`GET /health`), and the
same for a `GET /v1/runs/{id}` (the key checked, a status encoded).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import IO

import httpx2
import trio
from _stopwatch import run_cli

from band_trio.bench._peer import Peer, open_peer

KEY = "bench-key-0123456789abcdef"
WAIT = 20.0
PROMPT = "[slow] tell me a long story"


@asynccontextmanager
async def owned_process(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    stdin: int | IO[bytes] | None = None,
    stdout: int | IO[bytes] | None = None,
    stderr: int | IO[bytes] | None = None,
) -> AsyncIterator[trio.Process]:
    """Run `argv` for the length of the block; on the way out (an error and Ctrl-C too)
    SIGTERM to its own PID, SIGKILL if it has not exited within WAIT seconds."""
    process = await trio.lowlevel.open_process(
        list(argv), env=dict(env), stdin=stdin, stdout=stdout, stderr=stderr
    )
    try:
        yield process
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            with trio.move_on_after(WAIT):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@asynccontextmanager
async def runs_api(base_url: str, key: str = KEY) -> AsyncIterator[str]:
    """`band-trio runs-api --adapter band_trio.adapters:openai_chat` on a free port of
    127.0.0.1, pointed at the OpenAI-compatible `base_url`; its URL once it listens."""
    env = {
        **os.environ,
        "BAND_RUNS_API_KEY": key,
        "BAND_OPENAI_BASE_URL": base_url,
        "BAND_OPENAI_MODEL": "gpt-4o",
    }
    command = "import sys; from band_trio.cli import main; sys.exit(main())"
    argv = [sys.executable, "-c", command, "runs-api", "--adapter"]
    argv += ["band_trio.adapters:openai_chat", "--max-runs", "100"]
    async with owned_process(argv, env, stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(WAIT):
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                if not chunk:
                    raise RuntimeError("band-trio runs-api exited before it listened")
                line += chunk
        yield line.decode().rsplit(" ", 1)[1].strip()


async def _streaming(peer: Peer, since: int) -> int:
    """Wait for a new completion (after event `since`) to have sent 3 chunks; its req."""
    started = await peer.wait(since, lambda e: e.get("event") == "stream_started")
    req = int(started["req"])
    await peer.wait(
        since, lambda e: e.get("event") == "chunk" and e.get("req") == req and e["count"] >= 3
    )
    return req


class Raw:
    """A bare HTTP/1.1 client on one kept-alive trio TCP stream: a prebuilt request is
    one write, and the answer is read by its content-length. httpx2 spends about a
    millisecond of this process's time on each request; this spends tens of µs, so
    what is timed is the server."""

    def __init__(self, stream: trio.SocketStream, host: str, key: str = KEY) -> None:
        self.stream = stream
        self.host = host
        self.key = key
        self._buffer = b""

    @classmethod
    async def open(cls, url: str, key: str = KEY) -> Raw:
        host, port = url.removeprefix("http://").rstrip("/").split(":")
        return cls(await trio.open_tcp_stream(host, int(port)), f"{host}:{port}", key)

    def build(self, method: str, path: str, body: bytes = b"") -> bytes:
        return (
            f"{method} {path} HTTP/1.1\r\nhost: {self.host}\r\n"
            f"authorization: Bearer {self.key}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode() + body

    async def _receive(self) -> bytes:
        chunk = await self.stream.receive_some(65536)
        if not chunk:
            raise ConnectionError(f"{self.host} closed the connection")
        return chunk

    async def send(self, request: bytes) -> tuple[int, bytes]:
        await self.stream.send_all(request)
        while b"\r\n\r\n" not in self._buffer:
            self._buffer += await self._receive()
        head, _, rest = self._buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(
            int(line.split(":", 1)[1])
            for line in lines
            if line.lower().startswith("content-length")
        )
        while len(rest) < length:
            rest += await self._receive()
        self._buffer = rest[length:]
        return int(lines[0].split()[1]), rest[:length]


CANCELLED = re.compile(rb'"event": ?"run\.cancelled"')
"""`run.cancelled` in an event's JSON, band-trio's compact or Hermes' `json.dumps` spacing."""


async def watch_events(
    url: str, run_id: str, stamp: dict[str, float], ready: trio.Event, key: str = KEY
) -> None:
    """Subscribe on a connection of its own; stamp `run.cancelled` as its bytes arrive."""
    raw = await Raw.open(url, key)
    async with raw.stream:
        await raw.stream.send_all(raw.build("GET", f"/v1/runs/{run_id}/events"))
        seen = b""
        while b"\r\n\r\n" not in seen:
            seen += await raw.stream.receive_some(65536)
        ready.set()
        while not CANCELLED.search(seen):
            chunk = await raw.stream.receive_some(65536)
            if not chunk:
                raise RuntimeError("the event stream ended without run.cancelled")
            seen = seen[-64:] + chunk
        stamp["cancelled"] = time.perf_counter()


async def _trial(
    client: httpx2.AsyncClient, raw: Raw, peer: Peer, wait: bool, rows: dict[str, list[float]]
) -> None:
    mode = "stop?wait=true" if wait else "stop"
    since = len(peer.events)
    run_id = (await client.post("/v1/runs", json={"input": PROMPT})).json()["run_id"]
    stamp: dict[str, float] = {}
    async with trio.open_nursery() as nursery:
        subscribed = trio.Event()
        nursery.start_soon(
            watch_events, str(client.base_url).rstrip("/"), run_id, stamp, subscribed
        )
        await subscribed.wait()
        req = await _streaming(peer, since)
        query = "?wait=true" if wait else ""
        request = raw.build("POST", f"/v1/runs/{run_id}/stop{query}", b'{"reason": "bench"}')
        sent = time.perf_counter()
        status, answer = await raw.send(request)
        answered = time.perf_counter()
    closed = await peer.wait(
        since, lambda e: e.get("event") == "stream_cancelled" and e.get("req") == req
    )
    body = json.loads(answer)
    assert status == 200, body
    if wait:
        assert body["status"] == "cancelled" and body["remote_stop"] == "requested", body
    rows.setdefault(f"POST /{mode} → run.cancelled on the event stream", []).append(
        stamp["cancelled"] - sent
    )
    rows.setdefault(f"POST /{mode} → stubllm's stream closed (its generator cancelled)", []).append(
        closed["perf"] - sent
    )
    rows.setdefault(f"POST /{mode} → its answer ({body['status']})", []).append(answered - sent)
    # the floor, interleaved: bare round trips to the same server on the same connection
    for path, name in (
        ("/health", "floor: GET /health"),
        (f"/v1/runs/{run_id}", "floor: GET /v1/runs/{id}"),
    ):
        request = raw.build("GET", path)
        began = time.perf_counter()
        status, _ = await raw.send(request)
        rows.setdefault(name, []).append(time.perf_counter() - began)
        assert status == 200


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    async with (
        open_peer("stubllm", "stubllm_server.py", "--chunk-delay-ms", "50") as peer,
        runs_api(str(peer.ready["base_url"])) as url,
    ):
        headers = {"authorization": f"Bearer {KEY}"}
        async with httpx2.AsyncClient(base_url=url, headers=headers, timeout=WAIT) as client:
            raw = await Raw.open(url)
            await _trial(client, raw, peer, False, {})  # warm-up: imports, connections
            async with raw.stream:
                for _ in range(trials):
                    with trio.fail_after(WAIT):
                        await _trial(client, raw, peer, False, rows)
                        await _trial(client, raw, peer, True, rows)
    return rows


def p90(ordered: Sequence[float]) -> float:
    """The nearest-rank 90th percentile of an ascending sequence."""
    return ordered[min(len(ordered) - 1, math.ceil(0.9 * len(ordered)) - 1)]


def table(rows: dict[str, list[float]]) -> str:
    """Markdown: median, p90, min and max in milliseconds, and n."""
    lines = ["| interval | n | median ms | p90 | min | max |", "|---|---:|---:|---:|---:|---:|"]
    for name, samples in rows.items():
        ms = sorted(s * 1000 for s in samples)
        median = statistics.median(ms)
        lines.append(
            f"| {name} | {len(ms)} | {median:.2f} | {p90(ms):.2f} | {ms[0]:.2f} | {ms[-1]:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    run_cli(
        main, "{trials} trials per mode; stubllm 0.1.5 streaming 50 ms a chunk", __doc__,
        trials=30, render=table,
    )  # fmt: skip
