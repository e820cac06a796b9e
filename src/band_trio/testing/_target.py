"""A real HTTP target that records what a bridge forwards: for tests of a bridge's
configuration, band-trio's own tests and its benchmark.

    async with open_recording_target() as target:       # hypercorn, trio, loopback
        ...target.url...
        target.hold = True             # keep requests open until `release_all()`
        target.fail(500)               # answer the next request 500
        await target.wait_until(lambda: len(target.received) == 2)

Each request is a `Received` with `closed`, set the moment the client went
away before an answer: how a test (or the benchmark) sees a cancelled
forward's request being closed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial

import trio

from ..bridge import BridgePolicy, Envelope, decode_envelope
from ..server import (
    ClientGone,
    Listening,
    Receive,
    Scope,
    Send,
    ServeSettings,
    answer,
    read_body,
    serve,
)

__all__ = ["Received", "RecordingTarget", "open_recording_target"]


class Received:
    """One request the target received."""

    def __init__(self, envelope: Envelope, at: float) -> None:
        self.envelope = envelope
        self.at = at
        """When its body was read (`time.perf_counter()`, comparable across processes)."""
        self.closed = trio.Event()
        """Set when the client went away before the answer."""
        self.closed_at: float | None = None
        self.status: int | None = None
        """What it was answered (None: not answered)."""
        self._release = trio.Event()


class RecordingTarget:
    """The ASGI app; `url` is set once it is served."""

    def __init__(self) -> None:
        self.url = ""
        self.received: list[Received] = []
        self.hold = False
        """Keep each request open until `release_all()` (or the client goes away)."""
        self._failures: deque[int] = deque()
        self._changed = trio.Event()

    def fail(self, status: int, count: int = 1) -> None:
        """Answer the next `count` requests with `status`."""
        self._failures.extend([status] * count)

    def release_all(self) -> None:
        self.hold = False
        for item in self.received:
            item._release.set()

    def message_ids(self) -> list[str | None]:
        return [r.envelope.message_id for r in self.received]

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, looked at after each request's change (the
        caller sets the deadline)."""
        while not predicate():
            await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            body = await read_body(scope, receive, BridgePolicy().host_max_body)
        except ClientGone:
            return
        item = Received(decode_envelope(body), time.perf_counter())
        self.received.append(item)
        self._notify()
        if self._failures:
            item.status = self._failures.popleft()
            await answer(send, item.status, b'{"error":"failed on purpose"}')
            self._notify()
            return
        if self.hold:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_close, receive, item, nursery.cancel_scope)
                await item._release.wait()
                nursery.cancel_scope.cancel()
            if item.closed.is_set():
                self._notify()
                return
        item.status = 200
        await answer(send, 200, b'{"ok":true}')
        self._notify()


async def _watch_close(receive: Receive, item: Received, scope: trio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            item.closed_at = time.perf_counter()
            item.closed.set()
            scope.cancel()
            return


@asynccontextmanager
async def open_recording_target(host: str = "127.0.0.1") -> AsyncIterator[RecordingTarget]:
    """Serve a `RecordingTarget` on `host` (a free port) for the block; its `url` is
    what a bridge's HTTP target points at."""
    target = RecordingTarget()
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        settings = ServeSettings(grace=BridgePolicy().health_grace)
        listening: Listening = await nursery.start(
            partial(serve, target, host, 0, settings, stop=stop)
        )
        target.url = f"{listening.url}/band"
        try:
            yield target
        finally:
            target.release_all()
            stop.set()
