"""A peer that accepts a request and never answers: the hostile peer of issue 21.

    async with silent_peer() as peer:      # in the test's own trio run
        adapter = A2AAdapter(peer.url, streaming=True)
        ...
        await peer.wait_requests(1)        # the request arrived, and is held

It listens on 127.0.0.1, reads each connection's request head (and whatever body
follows), and then holds the connection open without a byte of answer until the
block ends. `requests` counts the request heads it read; `open` the connections it
holds now.

Run as a script (`python tests/peers/silent.py PORT_FILE`) it does the same in a
process of its own, writing its port to PORT_FILE, until SIGTERM: for tests whose
subject is a separate process too (a CLI's hard stop).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio


class SilentPeer:
    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/"
        self.requests = 0
        self.open = 0
        self._changed = trio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_requests(self, count: int) -> None:
        """Return once `count` request heads have arrived (the caller's deadline)."""
        while self.requests < count:
            await self._changed.wait()

    async def serve(self, stream: trio.SocketStream) -> None:
        self.open += 1
        self._notify()
        try:
            buffered = b""
            while True:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                buffered += chunk
                while b"\r\n\r\n" in buffered:  # a request head: count it, answer nothing
                    _, buffered = buffered.split(b"\r\n\r\n", 1)
                    self.requests += 1
                    self._notify()
                buffered = buffered[-65536:]
        except trio.BrokenResourceError:
            return
        finally:
            self.open -= 1
            self._notify()


@asynccontextmanager
async def silent_peer() -> AsyncIterator[SilentPeer]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    peer = SilentPeer(listeners[0].socket.getsockname()[1])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, peer.serve, listeners)
        try:
            yield peer
        finally:
            nursery.cancel_scope.cancel()


async def _main(port_file: Path) -> None:
    async with silent_peer() as peer:
        await trio.Path(port_file).write_text(f"{peer.port}\n")
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(_main, Path(sys.argv[1]))
