"""The console's live stream: one state per watched room, shared by its streams.

    Feeds.run                       one task beside the server (the console's)
    ├── forward changes             the platform's change signal → a rebuild due
    └── build                       for each watched room: its state, encoded once,
                                    at most once per `console_push_interval`
    stream (one per open page)      waits for its room's next state and sends it

A page's stream never builds a state itself: however many pages are open and
however often the platform changes (every request-log entry is a change), a
room's state is read from the store and encoded once per change, off the
request path, and its bytes are shared by every stream of that room. A stream
that reads slowly skips the states it missed and gets the newest.

What a stream costs is bounded: at most `console_streams` are open at once (one
more is answered 503 with a message the page shows); a state goes out in
`send_chunk` pieces, so an unread stream holds one piece, never a copy of the
state; and the server seam drops a client that takes nothing for
`send_stall`, and cuts every write off at its close, so no stream holds a
shutdown.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from time import perf_counter
from typing import Any
from urllib.parse import parse_qsl

import trio

from ..policy import PlatformPolicy
from ..server import answer
from ._console_presses import PressBook
from ._log import Changes
from ._responses import error_body

__all__ = ["Feed", "Feeds", "serve_stream"]


class Feed:
    """One watched room's newest state (an SSE `state` event), and who watches it."""

    __slots__ = ("_changed", "frame", "room_id", "version", "watchers")

    def __init__(self, room_id: str | None) -> None:
        self.room_id = room_id
        self.watchers = 0
        self.frame = b""
        self.version = 0
        """0 until the first state is built; then one more per state that differs."""
        self._changed = trio.Event()

    def publish(self, frame: bytes) -> None:
        self.frame = frame
        self.version += 1
        self._changed.set()
        self._changed = trio.Event()

    async def wait_past(self, version: int) -> None:
        """Return once a state newer than `version` is there (the caller's deadline)."""
        while self.version == version:
            await self._changed.wait()


class Feeds:
    """The feeds of the rooms the open streams watch, rebuilt by `run` after changes."""

    def __init__(
        self,
        changes: Changes,
        presses: PressBook,
        policy: PlatformPolicy,
        state: Callable[[str | None], bytes],
    ) -> None:
        self._changes = changes
        self._presses = presses
        self._policy = policy
        self._state = state
        self._feeds: dict[str | None, Feed] = {}
        self._due = trio.Event()
        self.streams = 0
        """Streams open now (at most `console_streams`)."""
        self.builds = 0
        """States built since the start (one per watched room per change, coalesced)."""

    def watch(self, room_id: str | None) -> Feed | None:
        """The room's feed for one more stream; None when `console_streams` are open."""
        if self.streams >= self._policy.console_streams:
            return None
        self.streams += 1
        feed = self._feeds.get(room_id)
        if feed is None:
            feed = self._feeds[room_id] = Feed(room_id)
            self._due.set()  # its first state is built at once
        feed.watchers += 1
        return feed

    def unwatch(self, feed: Feed) -> None:
        self.streams -= 1
        feed.watchers -= 1
        if feed.watchers == 0 and self._feeds.get(feed.room_id) is feed:
            del self._feeds[feed.room_id]
        self._changes.notify()  # `stats` changed: a page went (or was dropped)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Build the watched rooms' states after every change, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._forward_changes)
            task_status.started()
            while True:
                self._due = trio.Event()
                for feed in list(self._feeds.values()):
                    frame = b"event: state\ndata: " + self._state(feed.room_id) + b"\n\n"
                    self.builds += 1
                    if frame != feed.frame:
                        feed.publish(frame)
                await trio.sleep(self._policy.console_push_interval)  # coalesce what follows
                if self._due.is_set():
                    continue
                until = self._presses.open_until()  # a press times out with no other change
                wake = math.inf if until is None else max(until - perf_counter(), 0) + 0.01
                with trio.move_on_after(wake):
                    await self._due.wait()

    async def _forward_changes(self) -> None:
        while True:
            await self._changes.wait()
            if self._feeds:
                self._due.set()


async def serve_stream(
    feeds: Feeds,
    policy: PlatformPolicy,
    closing: trio.Event,
    request_id: str,
    scope: dict[str, Any],
    receive: Any,
    send: Any,
) -> None:
    """`GET /_console/api/stream?room=ID`: the room's states as server-sent events."""
    query = dict(parse_qsl(scope["query_string"].decode("latin-1")))
    feed = feeds.watch(query.get("room") or None)
    if feed is None:
        limit = policy.console_streams
        message = (
            f"The console already has {limit} pages open, its limit: close a tab "
            "showing it, and this page reconnects by itself."
        )
        body = error_body("too_many_streams", message, request_id)
        headers = (
            (b"cache-control", b"no-store"),
            (b"retry-after", str(math.ceil(policy.console_reconnect)).encode()),
        )
        await answer(send, 503, body, headers)
        return
    try:
        await _stream(feed, policy, closing, receive, send)
    finally:
        feeds.unwatch(feed)


async def _stream(
    feed: Feed, policy: PlatformPolicy, closing: trio.Event, receive: Any, send: Any
) -> None:
    headers = [
        (b"content-type", b"text/event-stream; charset=utf-8"),
        (b"cache-control", b"no-store"),
        (b"x-accel-buffering", b"no"),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    retry = f"retry: {int(policy.console_reconnect * 1000)}\n\n".encode()
    await send({"type": "http.response.body", "body": retry, "more_body": True})
    gone = trio.Event()
    chunk = policy.server.send_chunk
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_until_gone, receive, gone, nursery.cancel_scope)
        nursery.start_soon(_until_set, closing, nursery.cancel_scope)
        sent = 0
        while not gone.is_set():  # until a task above cancels the loop
            with trio.move_on_after(policy.console_keepalive) as idle:
                await feed.wait_past(sent)
            if idle.cancelled_caught:
                ping = b": keep-alive\n\n"
                await send({"type": "http.response.body", "body": ping, "more_body": True})
                continue
            sent, frame = feed.version, feed.frame
            for start in range(0, len(frame), chunk):  # one piece held at a time
                piece = frame[start : start + chunk]
                await send({"type": "http.response.body", "body": piece, "more_body": True})
    if not gone.is_set():  # closing: end the response so the page reconnects
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _until_gone(receive: Any, gone: trio.Event, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()
    scope.cancel(reason="the page went away")


async def _until_set(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel(reason="the platform is shutting down")
