"""One websocket connection to the platform: reader, heartbeat, joins and leaves.

The connection owns its TCP stream and closes it itself on every path, which
works around trio-websocket 0.12.2's leaks (docs/discussion/dependencies.md): the
client never closes its socket after a server-initiated close, and a cancelled
handshake leaves the socket open. Connect and close run under the policy's
deadlines, never the library's 60 s defaults.

The reader never blocks on its consumer: every push is handed to a synchronous
callback, which routes it without awaiting.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio
import trio_websocket
import wsproto
import wsproto.events
import wsproto.utilities

from .. import errors
from ..policy import Policy
from ..wire import (
    EVENT_TYPES,
    HEARTBEAT_TOPIC,
    Channels,
    FrameError,
    PayloadError,
    RefCounter,
    Reply,
    decode_frame,
    decode_payload,
)
from ._status import error_for_status

__all__ = [
    "CLOSE_HEARTBEAT_DEAD",
    "PushHandler",
    "ReplyHandler",
    "Socket",
    "SocketStats",
    "check_ws_url",
    "run_socket",
]

log = logging.getLogger("band_trio.link.socket")

PushHandler = Callable[[str, str, Any], None]
"""`handler(topic, event, payload)`: called by the reader for each current push."""

ReplyHandler = Callable[[Reply], None]
"""`handler(reply)`: called by the reader with the reply it was registered for."""

CLOSE_HEARTBEAT_DEAD = 4000


@dataclass
class SocketStats:
    """Counters of one link, kept across its connections."""

    frames_in: int = 0
    frames_out: int = 0
    bad_frames: int = 0
    bad_payloads: Counter[str] = field(default_factory=Counter)
    stale_pushes: int = 0
    ignored_events: Counter[str] = field(default_factory=Counter)


class _Pending:
    __slots__ = ("done", "reply", "topic")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.done = trio.Event()
        self.reply: Reply | None = None


class Socket:
    """A connected websocket. Created by `open_socket`; use its methods while open."""

    def __init__(
        self,
        ws: trio_websocket.WebSocketConnection,
        *,
        refs: RefCounter,
        policy: Policy,
        on_push: PushHandler,
        stats: SocketStats,
    ) -> None:
        self._ws = ws
        self._policy = policy
        self._on_push = on_push
        self.stats = stats
        self.channels = Channels(refs)
        self._pending: dict[str, _Pending] = {}
        self._expected: dict[str, tuple[str, ReplyHandler]] = {}
        """Replies handed to a callback (`expect`) rather than awaited, by ref."""
        self._heartbeat_ref: str | None = None
        self._last_ack = trio.current_time()
        self.closed = trio.Event()
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self._nursery: trio.Nursery | None = None

    # -- operations ---------------------------------------------------------

    async def send(self, text: str) -> None:
        try:
            await self._ws.send_message(text)
        except trio_websocket.ConnectionClosed as exc:
            raise errors.ConnectionClosedError("the websocket is closed") from exc
        self.stats.frames_out += 1

    async def send_many(self, texts: list[str]) -> None:
        """Send `texts`, in order, as one message each, in one write to the socket.

        A connection's joins go out hundreds at a time; one write for all of them,
        not a write (a system call and a scheduling round) each, was a tenth of an
        agent's CPU at start-up. trio-websocket has no batch send, so this frames
        the messages with its wsproto connection and writes them under its send
        lock (`_batch_parts`); should a release rename those parts, it sends them
        one by one."""
        parts = _batch_parts(self._ws) if len(texts) > 1 else None
        if parts is None:
            for text in texts:
                await self.send(text)
            return
        protocol, stream, lock = parts
        try:
            if self._ws.closed is not None:
                raise wsproto.utilities.LocalProtocolError("closed")
            data = b"".join(protocol.send(wsproto.events.TextMessage(data=t)) for t in texts)
            async with lock:
                await stream.send_all(data)
        except (
            wsproto.utilities.LocalProtocolError,
            trio.BrokenResourceError,
            trio.ClosedResourceError,
        ) as exc:
            raise errors.ConnectionClosedError("the websocket is closed") from exc
        self.stats.frames_out += len(texts)

    def expect(self, topic: str, ref: str, handler: ReplyHandler) -> None:
        """Hand the reply to `ref` on `topic` to `handler`, on the reader, without
        awaiting it: for a caller that sends many requests from one task and keeps
        its own deadlines (the connection's joins). `forget` withdraws it."""
        self._expected[ref] = (topic, handler)

    def forget(self, ref: str) -> None:
        """Withdraw `expect(.., ref, ..)`: a late reply is dropped."""
        self._expected.pop(ref, None)

    async def _request(self, topic: str, ref: str, text: str) -> Reply:
        pending = self._pending[ref] = _Pending(topic)
        try:
            await self.send(text)
            with trio.move_on_after(self._policy.join_deadline):
                await pending.done.wait()
        finally:
            del self._pending[ref]
        if pending.reply is None:
            if self.closed.is_set():
                raise errors.ConnectionClosedError(f"closed while waiting for {topic!r}")
            raise errors.JoinError(
                topic, f"no reply within {self._policy.join_deadline}s", refused=False
            )
        return pending.reply

    async def join(self, topic: str) -> None:
        """Join `topic`; returns once the platform said ok, else raises `JoinError`."""
        ref, text = self.channels.join_frame(topic)
        reply = await self._request(topic, ref, text)
        if reply.status != "ok":
            reason = reply.response.get("reason")
            raise errors.JoinError(topic, reason if isinstance(reason, str) else "invalid topic")
        self.channels.joined(topic, ref)

    async def leave(self, topic: str) -> None:
        """Leave `topic` (forgotten at once; the reply is awaited but not required)."""
        frame = self.channels.leave_frame(topic)
        if frame is None or self.closed.is_set():
            return
        ref, text = frame
        try:
            await self._request(topic, ref, text)
        except (errors.JoinError, errors.ConnectionClosedError) as exc:
            log.debug("leave of %s not confirmed: %s", topic, exc)

    async def aclose(self, code: int = 1000, reason: str | None = None) -> None:
        """Close with a close frame, within the policy's close deadline."""
        if self.close_code is None:
            self.close_code, self.close_reason = code, reason
        with trio.move_on_after(self._policy.close_deadline, shield=True):
            await self._ws.aclose(code, reason)

    # -- background work ----------------------------------------------------

    def close_soon(self, code: int = 1000, reason: str | None = None) -> None:
        """Start closing from synchronous code (the reader's push handlers)."""
        if self._nursery is not None:
            self._nursery.start_soon(self.aclose, code, reason)

    async def _read_loop(self) -> None:
        try:
            while True:
                text = await self._ws.get_message()
                self._on_text(text)
        except trio_websocket.ConnectionClosed as exc:
            if exc.reason is not None and self.close_code is None:
                self.close_code = exc.reason.code
                self.close_reason = exc.reason.reason
        finally:
            self.closed.set()
            self._expected.clear()  # their owner ends with the connection's work
            for pending in self._pending.values():
                pending.done.set()

    def _on_text(self, text: str | bytes) -> None:
        self.stats.frames_in += 1
        try:
            frame = decode_frame(text)
        except FrameError as exc:
            self.stats.bad_frames += 1
            log.warning("dropped a malformed frame: %s", exc)
            return
        if frame.event == "phx_reply":
            self._on_reply(frame.topic, frame.ref, frame.payload)
            return
        if not self.channels.is_current(frame):
            self.stats.stale_pushes += 1
            log.debug(
                "dropped %s on %s: join_ref %s is not current",
                frame.event,
                frame.topic,
                frame.join_ref,
            )
            return
        if frame.event not in EVENT_TYPES:
            self.stats.ignored_events[frame.event] += 1
            log.debug("ignored event %s on %s", frame.event, frame.topic)
            return
        try:
            payload = decode_payload(frame.event, frame.payload)
        except PayloadError as exc:
            self.stats.bad_payloads[frame.event] += 1
            log.error("dropped invalid %s payload on %s: %s", frame.event, frame.topic, exc.detail)
            return
        self._on_push(frame.topic, frame.event, payload)

    def _on_reply(self, topic: str, ref: str | None, raw: Any) -> None:
        try:
            reply: Reply = decode_payload("phx_reply", raw)
        except PayloadError as exc:
            self.stats.bad_payloads["phx_reply"] += 1
            log.error("dropped invalid phx_reply payload on %s: %s", topic, exc.detail)
            return
        if topic == HEARTBEAT_TOPIC and ref is not None and ref == self._heartbeat_ref:
            self._last_ack = trio.current_time()
            self._heartbeat_ref = None
            return
        if ref is None:
            return
        expected = self._expected.get(ref)
        if expected is not None and expected[0] == topic:
            del self._expected[ref]
            expected[1](reply)
            return
        pending = self._pending.get(ref)
        if pending is not None and pending.topic == topic:
            pending.reply = reply
            pending.done.set()

    async def _heartbeat_loop(self, scope: trio.CancelScope) -> None:
        """Send heartbeats; close with 4000 if none is answered within the dead threshold."""
        with scope:
            await self._heartbeats()

    async def _heartbeats(self) -> None:
        interval = self._policy.heartbeat_interval
        while True:
            dead_at = self._last_ack + self._policy.heartbeat_dead_after
            await trio.sleep_until(min(trio.current_time() + interval, dead_at))
            if trio.current_time() >= self._last_ack + self._policy.heartbeat_dead_after:
                log.warning(
                    "no heartbeat reply for %.1fs: closing", self._policy.heartbeat_dead_after
                )
                await self.aclose(CLOSE_HEARTBEAT_DEAD, "Heartbeat dead-threshold exceeded")
                return
            ref, text = self.channels.heartbeat_frame()
            self._heartbeat_ref = ref
            try:
                await self.send(text)
            except errors.ConnectionClosedError:
                return


def _batch_parts(
    ws: trio_websocket.WebSocketConnection,
) -> tuple[wsproto.WSConnection, trio.abc.Stream, trio.StrictFIFOLock] | None:
    """trio-websocket's (0.12) wsproto connection, stream and send lock, if it has them."""
    protocol = getattr(ws, "_wsproto", None)
    stream = getattr(ws, "_stream", None)
    lock = getattr(ws, "_stream_lock", None)
    if (
        isinstance(protocol, wsproto.WSConnection)
        and isinstance(stream, trio.abc.Stream)
        and isinstance(lock, trio.StrictFIFOLock)
    ):
        return protocol, stream, lock
    return None


def check_ws_url(url: str) -> None:
    """Raise `ConfigurationError` now for a URL the socket could never connect to."""
    _split_url(url, "agent", False)


def _split_url(url: str, agent_id: str, reject_conflict: bool) -> tuple[str, int, str, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise errors.ConfigurationError(f"not a websocket URL: {url!r}")
    if parts.scheme == "wss":
        raise errors.ConfigurationError("wss:// is not supported yet; use ws:// on loopback")
    query = [
        (k, v)
        for k, v in urllib.parse.parse_qsl(parts.query)
        if k not in ("api_key", "vsn", "token", "agent_id", "on_conflict")
    ]
    query += [("vsn", "2.0.0"), ("agent_id", agent_id)]
    if reject_conflict:
        query.append(("on_conflict", "reject"))
    port = parts.port or 80
    resource = (parts.path or "/") + "?" + urllib.parse.urlencode(query)
    host_header = parts.hostname if port == 80 else f"{parts.hostname}:{port}"
    return parts.hostname, port, resource, host_header


async def run_socket(
    url: str,
    *,
    agent_id: str,
    api_key: str,
    on_push: PushHandler,
    refs: RefCounter,
    stats: SocketStats,
    policy: Policy,
    reject_conflict: bool = False,
    task_status: trio.TaskStatus[Socket] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Connect, hand the `Socket` to `task_status.started`, and return once it has closed.

    Run it with `socket = await nursery.start(run_socket, ...)`. Before it has
    started, a refused upgrade raises the `PlatformResponseError` for its status
    (401 is `AuthenticationError`, 409 `ConflictError`) and an unreachable
    platform raises `PlatformUnavailableError`. Whatever happens, the TCP
    stream is closed before this returns.
    """
    host, port, resource, host_header = _split_url(url, agent_id, reject_conflict)
    headers = [(b"x-api-key", api_key.encode())]
    try:
        with trio.fail_after(policy.connect_deadline):
            stream = await trio.open_tcp_stream(host, port)
    except (OSError, trio.TooSlowError) as exc:
        raise errors.PlatformUnavailableError(f"cannot connect to {url}: {exc!r}") from exc
    try:
        async with trio.open_nursery() as nursery:
            with trio.fail_after(policy.connect_deadline):
                ws = await trio_websocket.wrap_client_stream(
                    nursery,
                    stream,
                    host_header,
                    resource,
                    extra_headers=headers,
                    message_queue_size=64,
                    max_message_size=policy.max_message_size,
                )
            socket = Socket(ws, refs=refs, policy=policy, on_push=on_push, stats=stats)
            socket._nursery = nursery
            nursery.start_soon(socket._read_loop)
            heartbeat = trio.CancelScope()
            nursery.start_soon(socket._heartbeat_loop, heartbeat)
            task_status.started(socket)
            await socket.closed.wait()
            heartbeat.cancel()
            # The library's own reader still has to see the peer's close frame (which
            # completes a close we started) and EOF; give it the close deadline, no more.
            nursery.cancel_scope.deadline = trio.current_time() + policy.close_deadline
    except* trio_websocket.ConnectionRejected as group:
        rejected = group.exceptions[0]
        assert isinstance(rejected, trio_websocket.ConnectionRejected)
        retry_after = dict(rejected.headers).get(b"retry-after")
        raise error_for_status(
            rejected.status_code,
            rejected.body,
            retry_after.decode() if retry_after else None,
        ) from rejected
    except* (trio.TooSlowError, trio_websocket.HandshakeError, trio.BrokenResourceError) as group:
        raise errors.PlatformUnavailableError(
            f"websocket handshake with {url} failed: {group.exceptions[0]!r}"
        ) from group
    finally:
        await trio.aclose_forcefully(stream)
