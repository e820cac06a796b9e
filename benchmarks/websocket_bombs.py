"""What one agent's websocket can make the embedded platform hold (issue 38): peak RSS.

    .venv/bin/python benchmarks/websocket_bombs.py [--only bomb,six,frame,fragments,ratio4]

Starts `band-trio platform --seed` in its own process (state in memory) and
attacks its agent socket (`/api/v1/socket/websocket`, the seeded agent's key)
over raw sockets, framing by hand as a hostile client would: each client offers
permessage-deflate and sends what it sends whether the platform agreed or not,
and goes on sending after any close frame, until the platform stops reading.
Each attack reports the platform's RSS before, its peak during (VmHWM, reset
through /proc/PID/clear_refs first) and after, the close code each client got
and how much it could send. Run it once per checkout to compare
(PYTHONPATH=<old src> for the old code).

bomb       one compressed frame of 204 KB that inflates to 200 MB (zeros)
six        six such frames at once, one per socket
ratio4     one compressed frame of 16 MB that inflates to 64 MB (two letters at random)
frame      one uncompressed frame announcing 100 MB, sent in 64 KiB pieces
fragments  one message of a hundred 1 MB frames (100 MB in all)
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from _platform_process import platform_process

MASK = b"\0\0\0\0"
PIECE = bytes(64 * 1024)
CAP = 60.0
"""Seconds one client may take; the old code took about 10 s for the 100 MB frame."""


def status(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def header(opcode: int, size: int, *, fin: bool = True, rsv1: bool = False) -> bytes:
    head = bytes([(0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode])
    if size < 126:
        return head + bytes([0x80 | size]) + MASK
    if size < 1 << 16:
        return head + bytes([0x80 | 126]) + struct.pack("!H", size) + MASK
    return head + bytes([0x80 | 127]) + struct.pack("!Q", size) + MASK


def deflated(size: int, block: bytes, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
    parts = [compressor.compress(block) for _ in range(size // len(block))]
    parts.append(compressor.flush(zlib.Z_SYNC_FLUSH)[:-4])
    return b"".join(parts)


def one_frame(payload: bytes, *, rsv1: bool) -> Callable[[], Iterator[bytes]]:
    def frames() -> Iterator[bytes]:
        yield header(0x2, len(payload), rsv1=rsv1)
        for start in range(0, len(payload), len(PIECE)):
            yield payload[start : start + len(PIECE)]

    return frames


def announced(size: int) -> Iterator[bytes]:
    yield header(0x2, size)
    for _ in range(size // len(PIECE)):
        yield PIECE


def fragments() -> Iterator[bytes]:
    piece = bytes(1000 * 1000)
    for i in range(100):
        yield header(0x2 if i == 0 else 0x0, len(piece), fin=i == 99) + piece


class Client(threading.Thread):
    """One socket: the upgrade, then `frames` sent until the platform stops reading,
    while the close frame is read."""

    def __init__(self, info: dict[str, str], frames: Callable[[], Iterator[bytes]]) -> None:
        super().__init__(daemon=True)
        self.info, self.frames = info, frames
        self.sent = 0
        self.code: int | None = None
        self.extensions = "-"

    def run(self) -> None:
        host, port = self.info["rest_url"].removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=CAP) as sock:
            sock.sendall(
                (
                    f"GET /api/v1/socket/websocket?vsn=2.0.0&agent_id={self.info['agent_id']}"
                    f" HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    "Sec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n"
                    f"X-API-Key: {self.info['api_key']}\r\n\r\n"
                ).encode()
            )
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(4096)
            head, _, rest = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 101"), head
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"sec-websocket-extensions:"):
                    self.extensions = line.split(b":", 1)[1].strip().decode()
            reader = threading.Thread(target=self.read, args=(sock, rest), daemon=True)
            reader.start()
            try:
                for data in self.frames():
                    sock.sendall(data)
                    self.sent += len(data)
            except OSError:
                pass  # the platform closed the connection
            reader.join(CAP)

    def read(self, sock: socket.socket, pending: bytes) -> None:
        try:
            while True:
                while len(pending) < 4:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    pending += chunk
                if pending[0] & 0x0F == 0x8:
                    self.code = struct.unpack("!H", pending[2:4])[0]
                    return
                size = pending[1] & 0x7F  # the platform's own frames are small here
                pending = pending[2 + size :]
        except OSError:
            return


def attack(pid: int, info: dict[str, str], name: str, clients: list[Client]) -> None:
    before = status(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from here
    started = time.monotonic()
    for client in clients:
        client.start()
    for client in clients:
        client.join(CAP)
    took = time.monotonic() - started
    time.sleep(0.5)
    peak, after = status(pid, "VmHWM"), status(pid, "VmRSS")
    codes = sorted({str(c.code) for c in clients})
    sent = max(c.sent for c in clients) / 2**20
    print(
        f"{name:10s} RSS {before:6.1f} MB, peak {peak:7.1f} MB (+{peak - before:6.1f}), "
        f"after {after:6.1f} MB; close {','.join(codes)}; deflate {clients[0].extensions!r}; "
        f"sent {sent:6.1f} MiB; {took:.1f} s"
    )


def main(only: set[str]) -> None:
    zeros = deflated(200 * 1000 * 1000, bytes(64 * 1024), 9)
    letters = deflated(64 * 1024 * 1024, bytes(random.Random(7).choices(b"ab", k=64 * 1024)), 1)
    print(f"bomb: {len(zeros) / 1000:.0f} KB -> 200 MB; ratio4: {len(letters) / 2**20:.1f} MiB")
    attacks: dict[str, Callable[[dict[str, str]], list[Client]]] = {
        "bomb": lambda info: [Client(info, one_frame(zeros, rsv1=True))],
        "six": lambda info: [Client(info, one_frame(zeros, rsv1=True)) for _ in range(6)],
        "ratio4": lambda info: [Client(info, one_frame(letters, rsv1=True))],
        "frame": lambda info: [Client(info, lambda: announced(100 * 1000 * 1000))],
        "fragments": lambda info: [Client(info, fragments)],
    }
    with platform_process() as (proc, info):
        for name, make in attacks.items():
            if not only or name in only:
                attack(proc.pid, info, name, make(info))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated attacks")
    args = parser.parse_args()
    if not os.path.exists("/proc/self/status"):
        sys.exit("needs /proc (Linux)")
    main({name for name in args.only.split(",") if name})
