"""The Phoenix V2 websocket at `/api/v1/socket/websocket` (docs/reference/platform.md).

One ASGI websocket call per connection. The upgrade is authenticated before it
is accepted; a refusal is an HTTP response with an error envelope, sent through
the `websocket.http.response` extension (hypercorn supports it). An accepted
connection runs two tasks in its own nursery: the reader (frames in, replies
queued) and the writer (the outbound queue, drained in order). Anything a
client sends, however broken, is logged and counted, never fatal.

The reader reads no frame while the outbound queue is full (`Outbox.wait_room`):
a client that pipelines requests gets its replies as fast as it reads them, and
one that stopped reading is aborted once nothing was sent to it for
`PlatformPolicy.outbound_stall` (`_outbox.py`).
"""

from __future__ import annotations

import uuid
from time import perf_counter
from typing import Any
from urllib.parse import parse_qsl

import trio

from ..wire import FrameError, decode_frame, encode_frame
from ._hub import Close, Connection
from ._log import logger
from ._outbox import Outbox, Stalled
from ._platform import Platform
from ._responses import Response, error_body
from ._store import Agent

__all__ = ["WS_PATH", "serve_socket"]

WS_PATH = "/api/v1/socket/websocket"

_OK = {"status": "ok", "response": {}}
_AGENT_TOPICS = frozenset({"agent_control", "agent_rooms", "agent_contacts"})
_ROOM_TOPICS = frozenset({"chat_room", "room_participants"})

ASGIMessage = dict[str, Any]
Receive = Any
Send = Any


class _Refusal(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _authenticate(p: Platform, scope: dict[str, Any]) -> tuple[Agent, bool]:
    """The agent this upgrade is for and whether it asked `on_conflict=reject`."""
    if scope["path"] != WS_PATH:
        raise _Refusal(404, "not_found", "no websocket endpoint here")
    query = dict(parse_qsl(scope["query_string"].decode("latin-1")))
    vsn = query.get("vsn", "2.0.0")
    if not vsn.startswith("2."):
        raise _Refusal(400, "unsupported_vsn", f"serializer {vsn} is not supported; use 2.0.0")
    key = query.get("api_key")
    for name, value in scope["headers"]:
        if name == b"x-api-key":
            key = value.decode("latin-1")
            break
    agent = p.store.agents_by_key.get(key) if key else None
    if agent is None:
        raise _Refusal(401, "unauthorized", "missing or invalid API key")
    agent_id = query.get("agent_id")
    if agent_id is not None and agent_id != agent.id:
        raise _Refusal(403, "forbidden", "agent_id does not match the API key")
    reject = query.get("on_conflict") == "reject"
    if reject and agent.id in p.hub.live:
        raise _Refusal(409, "connection_conflict", "another connection is live for this agent")
    return agent, reject


async def serve_socket(p: Platform, scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Handle one websocket from upgrade to close; never raises but `Cancelled`."""
    t = perf_counter()
    path = scope["path"]
    try:
        if (await receive())["type"] != "websocket.connect":
            return
        if p.faults.upgrades:
            refused = p.faults.take_upgrade(path)
            if refused is not None:
                await _refuse(p, send, t, path, refused)
                return
        try:
            agent, _ = _authenticate(p, scope)
        except _Refusal as refusal:
            body = error_body(refusal.code, refusal.message, f"ws-{uuid.uuid4().hex[:12]}")
            await _refuse(p, send, t, path, Response(refusal.status, body))
            return
        await send({"type": "websocket.accept"})
        await _run(p, agent, receive, send, t, path, scope.get("client"), scope.get("server"))
    except* Exception as group:
        p.request_log.count("socket_errors")
        logger.error("websocket handler failed", exc_info=group)


async def _refuse(p: Platform, send: Send, t: float, path: str, refusal: Response) -> None:
    """Answer the upgrade with an HTTP response instead of accepting it."""
    p.request_log.count("upgrades_refused")
    p.request_log.append("ws_open", t, method="GET", path=path, status=refusal.status)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(refusal.body)).encode()),
        *refusal.headers,
    ]
    start = {"type": "websocket.http.response.start", "status": refusal.status}
    await send({**start, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": refusal.body})


def _address(value: Any) -> tuple[str, int] | None:
    if isinstance(value, (tuple, list)) and len(value) >= 2:
        return str(value[0]), int(value[1])
    return None


async def _run(
    p: Platform,
    agent: Agent,
    receive: Receive,
    send: Send,
    t: float,
    path: str,
    client: Any = None,
    server: Any = None,
) -> None:
    policy = p.policy
    outbox = Outbox[str | Close](
        policy.outbound_queue, policy.outbound_overflow, policy.outbound_stall
    )
    async with trio.open_nursery() as nursery:
        conn = Connection(
            agent.id,
            str(uuid.uuid4()),
            outbox,
            nursery,
            client=_address(client),
            server=_address(server),
        )
        old = p.hub.attach(conn)
        p.request_log.append("ws_open", t, agent_id=agent.id, method="GET", path=path, status=101)
        try:
            if old is not None:
                p.hub.supersede(old)  # not retryable: the SDK treats it as final
            nursery.start_soon(_writer, p, conn, send)
            await _reader(p, conn, receive)
            nursery.cancel_scope.cancel(reason="client closed")
        finally:
            outbox.close()
            if conn.aborted is not None:
                p.request_log.count(f"sockets_{conn.aborted}")
            p.hub.detach(conn)
            p.request_log.append("ws_close", perf_counter(), agent_id=agent.id)


async def _writer(p: Platform, conn: Connection, send: Send) -> None:
    log = p.request_log
    outbox = conn.outbox
    while True:
        try:
            item = await outbox.get()
        except trio.EndOfChannel:
            return
        if isinstance(item, Close):
            await send({"type": "websocket.close", "code": item.code, "reason": item.reason})
            await trio.sleep(p.policy.close_grace)  # the reader ends it sooner
            conn.nursery.cancel_scope.cancel(reason="client did not answer the close")
            return
        # Stamped just before the send, logged after it: the append wakes every
        # `wait_until`, and hypercorn's send yields (its write lock) before it
        # writes, so logging first would run those waiters ahead of the frame.
        t = perf_counter()
        try:
            await send({"type": "websocket.send", "text": item})
        finally:
            log.append("ws_out", t, agent_id=conn.agent_id, frame=item)
            log.count("ws_frames_out")
        outbox.sent()


async def _reader(p: Platform, conn: Connection, receive: Receive) -> None:
    log = p.request_log
    outbox = conn.outbox
    while True:
        try:
            if await outbox.wait_room():
                log.count("socket_backpressure")
        except Stalled:
            stall = p.policy.outbound_stall
            why = f"the agent stopped reading (nothing sent for {stall:g} s, {len(outbox)} waiting)"
            conn.abort("stalled", why)
            return
        message = await receive()
        t = perf_counter()
        kind = message["type"]
        if kind == "websocket.disconnect":
            conn.end(f"closed by the agent: {message.get('code', 1005)}")
            return
        if kind != "websocket.receive":
            continue
        text = message.get("text")
        if text is None:
            log.count("bad_frames")
            log.append("note", t, agent_id=conn.agent_id, body="binary frame dropped")
            continue
        log.append("ws_in", t, agent_id=conn.agent_id, frame=text)
        log.count("ws_frames_in")
        try:
            _on_frame(p, conn, text)
        except Exception:
            log.count("frame_errors")
            logger.exception("error handling frame %r", text[:200])


def _on_frame(p: Platform, conn: Connection, text: str) -> None:
    try:
        frame = decode_frame(text)
    except FrameError as exc:
        p.request_log.count("bad_frames")
        p.request_log.append(
            "note", perf_counter(), agent_id=conn.agent_id, body=f"bad frame: {exc}"
        )
        return
    topic, event = frame.topic, frame.event
    if topic == "phoenix":
        if event == "heartbeat":
            if p.faults.muting and p.faults.drop_heartbeat(conn.agent_id):
                return
            conn.enqueue(encode_frame(frame.join_ref, frame.ref, topic, "phx_reply", _OK))
        return
    if event == "phx_join":
        join_ref = frame.join_ref or frame.ref
        reason = "join_ref required" if join_ref is None else _refuse_join(p, conn.agent_id, topic)
        if reason is None and p.faults.joins:
            reason = p.faults.take_join(topic, conn.agent_id)
        if reason is None and join_ref is not None:
            p.hub.join(conn, topic, join_ref)
            conn.enqueue(encode_frame(join_ref, frame.ref, topic, "phx_reply", _OK))
        else:
            p.request_log.count("joins_refused")
            reply = {"status": "error", "response": {"reason": reason}}
            conn.enqueue(encode_frame(frame.join_ref, frame.ref, topic, "phx_reply", reply))
    elif event == "phx_leave":
        p.hub.leave(conn, topic)
        conn.enqueue(encode_frame(frame.join_ref, frame.ref, topic, "phx_reply", _OK))
    else:
        p.request_log.count("unhandled_events")
    p.changes.notify()


def _refuse_join(p: Platform, agent_id: str, topic: str) -> str | None:
    """Why `agent_id` may not join `topic`, or None if it may."""
    kind, _, ident = topic.partition(":")
    if kind in _AGENT_TOPICS:
        return None if ident == agent_id else "unauthorized"
    if kind in _ROOM_TOPICS:
        return None if p.store.is_participant(ident, agent_id) else "unauthorized"
    return "invalid topic"
