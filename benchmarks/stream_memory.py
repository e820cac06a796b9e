"""What clients that never read cost the console and the runs API: RSS, another
request's latency while they hang on, and the time to exit after SIGTERM.

    .venv/bin/python benchmarks/stream_memory.py [--streams 150] [--subscribers 100]

Each server runs as its own process (`band-trio platform --console`, then
`band-trio runs-api --adapter stream_memory:chatty`); this script talks to them
over loopback only, so the same script measures an older band-trio too
(`PYTHONPATH=/path/to/old/src`).

1. **Console**: a room of 200 messages of 20,000 characters (a state of about
   4 MB); `--reading` pages that read their stream, and 10 changes (each a new
   state for every page); then `--streams` pages that open its stream and never read (a 4 KiB
   receive buffer: every write to them stalls at once), then 10 more messages
   (each a new state for every stream). Sampled: RSS; the latency of
   `GET /_admin/stats`, requested back to back from another thread the whole
   time the streams open and the changes land (median, p99, max); after
   SIGTERM, the seconds to exit and the exit status (killed after
   `--exit-limit`).
2. **Runs API**: one run whose adapter emits 160 status events of 64 KiB (a
   10 MiB event log) and then works until stopped; `--subscribers` clients
   that follow its events and never read. Sampled as above, with `GET /health`.

A stream the server refused (the console's cap on open streams) is counted,
not held.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

from band_trio.contract import Adapter, Turn

HERE = Path(__file__).resolve().parent
KEY = "bench-key-0123456789abcdef"
PIECE = "x" * 65_536


class Chatty(Adapter):
    """160 status events of 64 KiB, then work until stopped."""

    async def on_turn(self, turn: Turn) -> None:
        import trio

        for _ in range(160):
            await turn.send_event(PIECE, message_type="status")
        await turn.send_event("said it all", message_type="status")
        await trio.sleep_forever()


def chatty() -> Chatty:
    return Chatty()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def stalled(port: int, path: str, headers: str = "") -> socket.socket | None:
    """A client that sends its GET, reads the status line and nothing more (None if
    the server answered anything but 200)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{headers}\r\n".encode())
    head = sock.recv(12)
    if not head.startswith(b"HTTP/1.1 200"):
        sock.close()
        return None
    return sock


class Sampler:
    """GETs `url` back to back in a thread while the clients pile up: the latency
    another request sees while the server deals with them."""

    def __init__(self, url: str, **kwargs: object) -> None:
        import threading

        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url, kwargs), daemon=True)
        self._thread.start()

    def _run(self, url: str, kwargs: dict[str, object]) -> None:
        with httpx2.Client(timeout=120) as client:
            while not self._stop.is_set():
                started = time.perf_counter()
                client.get(url, **kwargs)  # type: ignore[arg-type]
                self.times.append((time.perf_counter() - started) * 1000)
                self._stop.wait(0.01)

    def done(self) -> str:
        self._stop.set()
        self._thread.join()
        ordered = sorted(self.times)
        return (
            f"{len(ordered)} GETs meanwhile: median {statistics.median(ordered):.1f} ms, "
            f"p99 {ordered[int(len(ordered) * 0.99)]:.1f} ms, max {ordered[-1]:.1f} ms"
        )


def stop(proc: subprocess.Popen[bytes], limit: float) -> str:
    started = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return f"> {limit:g} s (killed)"
    return f"{time.perf_counter() - started:.2f} s, exit {code}"


def reader(port: int, path: str) -> socket.socket:
    """A page that reads its stream as fast as it comes (a thread drains it)."""
    import threading

    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.sendall(f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\r\n".encode())

    def drain() -> None:
        try:
            while sock.recv(1 << 20):
                pass
        except OSError:
            pass

    threading.Thread(target=drain, daemon=True).start()
    return sock


def console(streams: int, reading: int, limit: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        ready = Path(folder) / "ready.json"
        argv = [sys.executable, "-m", "band_trio", "platform", "--console", "--seed"]
        proc = subprocess.Popen(
            [*argv, "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        held: list[socket.socket] = []
        try:
            deadline = time.monotonic() + 20
            while not ready.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("the platform did not start")
                time.sleep(0.05)
            info = json.loads(ready.read_text())
            port = int(info["rest_url"].rsplit(":", 1)[1])
            room, user = info["room_id"], info["user_id"]
            json_body = {"content-type": "application/json"}
            with httpx2.Client(base_url=info["admin_url"], headers=json_body, timeout=60) as admin:
                print(f"console: baseline {rss_mb(proc.pid):.0f} MB")
                for n in range(200):
                    body = {"sender_id": user, "content": f"{n:03d}" + "m" * 19_997}
                    admin.post(f"/rooms/{room}/messages", json=body).raise_for_status()
                print(f"  a room of 200 x 20,000 characters: {rss_mb(proc.pid):.0f} MB")
                readers = [
                    reader(port, f"/_console/api/stream?room={room}") for _ in range(reading)
                ]
                time.sleep(2)
                sampler = Sampler(f"{info['admin_url']}/stats")
                for n in range(10):  # each change: a new state for every page
                    body = {"sender_id": user, "content": f"read {n}"}
                    admin.post(f"/rooms/{room}/messages", json=body).raise_for_status()
                    time.sleep(0.2)
                time.sleep(2)
                print(
                    f"  {reading} pages that read, 10 changes: {rss_mb(proc.pid):.0f} MB; "
                    f"GET /_admin/stats: {sampler.done()}"
                )
                for sock in readers:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes its drain thread, sends the FIN
                    sock.close()
                time.sleep(1)
                refused = 0
                sampler = Sampler(f"{info['admin_url']}/stats")
                for _ in range(streams):
                    sock = stalled(port, f"/_console/api/stream?room={room}")
                    if sock is None:
                        refused += 1
                    else:
                        held.append(sock)
                for n in range(10):  # each change: a new state for every stream
                    body = {"sender_id": user, "content": f"more {n}"}
                    admin.post(f"/rooms/{room}/messages", json=body).raise_for_status()
                    time.sleep(0.2)
                time.sleep(3)  # let the writes pile up as far as they will
                print(
                    f"  {len(held)} streams that never read ({refused} refused), 10 changes: "
                    f"{rss_mb(proc.pid):.0f} MB; GET /_admin/stats: {sampler.done()}"
                )
                print(f"  SIGTERM → {stop(proc, limit)}")
        finally:
            for sock in held:
                sock.close()
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def runs(subscribers: int, limit: float) -> None:
    env = {**os.environ, "BAND_RUNS_API_KEY": KEY}
    proc = subprocess.Popen(
        [sys.executable, "-m", "band_trio", "runs-api", "--port", "0",
         "--adapter", "stream_memory:chatty"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=HERE,
        env=env,
    )  # fmt: skip
    held: list[socket.socket] = []
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().rsplit(" ", 1)[1].strip()
        port = int(url.rsplit(":", 1)[1])
        auth = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
        with httpx2.Client(base_url=url, headers=auth, timeout=60) as client:
            print(f"runs API: baseline {rss_mb(proc.pid):.0f} MB")
            run_id = client.post("/v1/runs", json={"input": "go"}).json()["run_id"]
            with client.stream("GET", f"/v1/runs/{run_id}/events") as events:
                for line in events.iter_lines():
                    if "said it all" in line:
                        break
            print(f"  a run with a 10 MiB event log: {rss_mb(proc.pid):.0f} MB")
            header = f"authorization: Bearer {KEY}\r\n"
            sampler = Sampler(f"{url}/health")
            for _ in range(subscribers):
                sock = stalled(port, f"/v1/runs/{run_id}/events", header)
                assert sock is not None
                held.append(sock)
            time.sleep(3)
            print(
                f"  {subscribers} subscribers that never read: {rss_mb(proc.pid):.0f} MB; "
                f"GET /health: {sampler.done()}"
            )
            print(f"  SIGTERM → {stop(proc, limit)}")
    finally:
        for sock in held:
            sock.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=150)
    parser.add_argument("--reading", type=int, default=30)
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--exit-limit", type=float, default=60.0)
    parser.add_argument("--only", choices=["console", "runs"])
    args = parser.parse_args()
    if args.only != "runs":
        console(args.streams, args.reading, args.exit_limit)
    if args.only != "console":
        runs(args.subscribers, args.exit_limit)
