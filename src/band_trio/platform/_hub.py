"""Live websocket connections, what each has joined, and pushes to them.

A push is encoded with the `join_ref` of the receiving connection's *current*
join of the topic (a V2 client drops anything else) and put on that
connection's outbound queue without waiting: the REST handler or admin call
that caused it never blocks on a slow socket. Each connection's writer task
drains its queue (`_socket.py`). A push that finds the queue past its overflow
(`_outbox.py`: the client fell that far behind the fan-out) aborts that
connection alone; the agent resyncs through `/next`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import trio

from ..policy import PlatformPolicy
from ..wire import Supersede, encode_frame
from ._log import Changes, RequestLog
from ._outbox import Outbox
from ._records import now_iso

__all__ = ["Close", "Connection", "Hub"]


@dataclass(frozen=True, slots=True)
class Close:
    """Queue item: send a close frame with this code, then end the connection."""

    code: int
    reason: str = ""


@dataclass(eq=False, slots=True)
class Connection:
    """One accepted websocket: its agent, its joins and its outbound queue."""

    agent_id: str
    socket_id: str
    outbox: Outbox[str | Close]
    nursery: trio.Nursery
    joins: dict[str, str] = field(default_factory=dict)
    closing: bool = False
    client: tuple[str, int] | None = None
    """The peer's TCP address (the ASGI scope's `client`), for `Faults.drop_socket`."""
    server: tuple[str, int] | None = None
    """The local TCP address (the ASGI scope's `server`)."""
    ended: str | None = None
    """Why the connection ended, once known: the first cause recorded wins (a close
    the platform sends, an overflow, the client's own close), for the console."""
    aborted: str | None = None
    """`stalled` or `overflowed` once the platform cut the connection off (counted
    as `sockets_stalled` / `sockets_overflowed` when it is gone)."""

    def end(self, why: str) -> None:
        if self.ended is None:
            self.ended = why

    def abort(self, kind: str, why: str) -> None:
        """Cut the connection off now, without a close frame (hypercorn sends 1011)."""
        if self.aborted is None:
            self.aborted = kind
        self.end(f"aborted by the platform: {why}")
        self.nursery.cancel_scope.cancel(reason=f"outbound queue {kind}")

    def enqueue(self, item: str | Close) -> bool:
        """Queue a frame without blocking; abort the connection if the queue is past
        its overflow (`Outbox`)."""
        outbox = self.outbox
        if outbox.put(item):
            return True
        if not outbox.closed:
            self.abort(
                "overflowed",
                f"the agent fell behind ({len(outbox)} frames waiting to be sent)",
            )
        return False

    def close(self, code: int, reason: str = "", *, delay: float = 0.0) -> None:
        """Close this connection (after `delay` seconds), once."""
        if self.closing:
            return
        self.closing = True
        self.end(f"closed by the platform: {code} {reason}".rstrip())
        if delay > 0:
            self.nursery.start_soon(self._close_later, code, reason, delay)
        elif not self.enqueue(Close(code, reason)):
            self.nursery.cancel_scope.cancel(reason="close requested")

    async def _close_later(self, code: int, reason: str, delay: float) -> None:
        await trio.sleep(delay)
        if not self.enqueue(Close(code, reason)):
            self.nursery.cancel_scope.cancel(reason="close requested")


class Hub:
    """Every live connection, by agent and by joined topic."""

    def __init__(self, log: RequestLog, changes: Changes, policy: PlatformPolicy) -> None:
        self.policy = policy
        self.live: dict[str, Connection] = {}
        self.last_disconnect: dict[str, tuple[str, str]] = {}
        """Per agent: when (ISO-8601) and why its last connection ended."""
        self.connections: set[Connection] = set()
        self._subscribers: dict[str, set[Connection]] = {}
        self._log = log
        self._changes = changes
        self._empty = trio.Event()
        self._empty.set()

    # -- connections ----------------------------------------------------------

    def attach(self, conn: Connection) -> Connection | None:
        """Make `conn` its agent's live connection; return the one it replaces."""
        old = self.live.get(conn.agent_id)
        self.live[conn.agent_id] = conn
        self.connections.add(conn)
        if self._empty.is_set():
            self._empty = trio.Event()
        self._log.count("connections_opened")
        self._changes.notify()
        return old

    def detach(self, conn: Connection) -> None:
        """Forget a closed connection and all its joins."""
        for topic in conn.joins:
            subs = self._subscribers.get(topic)
            if subs is not None:
                subs.discard(conn)
                if not subs:
                    del self._subscribers[topic]
        conn.joins.clear()
        self.connections.discard(conn)
        if self.live.get(conn.agent_id) is conn:
            del self.live[conn.agent_id]
        why = conn.ended or "connection lost (no close frame)"
        self.last_disconnect[conn.agent_id] = (now_iso(), why)
        if not self.connections:
            self._empty.set()
        self._log.count("connections_closed")
        self._changes.notify()

    def close_all(self, code: int, reason: str = "") -> None:
        for conn in list(self.connections):
            conn.close(code, reason)

    async def wait_empty(self) -> None:
        await self._empty.wait()

    # -- joins ----------------------------------------------------------------

    def join(self, conn: Connection, topic: str, join_ref: str) -> None:
        conn.joins[topic] = join_ref
        self._subscribers.setdefault(topic, set()).add(conn)

    def leave(self, conn: Connection, topic: str) -> None:
        if conn.joins.pop(topic, None) is not None:
            subs = self._subscribers[topic]
            subs.discard(conn)
            if not subs:
                del self._subscribers[topic]

    def forget(self, topic: str, agent_id: str | None = None) -> None:
        """Drop every join of `topic` (or only `agent_id`'s), e.g. after a room is gone."""
        for conn in list(self._subscribers.get(topic, ())):
            if agent_id is None or conn.agent_id == agent_id:
                self.leave(conn, topic)

    # -- pushes ---------------------------------------------------------------

    def send(self, conn: Connection, topic: str, event: str, payload: Any) -> bool:
        """Push to one connection if it has joined `topic`, with that join's ref."""
        join_ref = conn.joins.get(topic)
        if join_ref is None:
            self._log.count("pushes_unjoined")
            return False
        self._log.count("pushes")
        return conn.enqueue(encode_frame(join_ref, None, topic, event, payload))

    def push(self, agent_id: str, topic: str, event: str, payload: Any) -> bool:
        """Push to an agent's live connection (if it has joined `topic`)."""
        conn = self.live.get(agent_id)
        if conn is None:
            self._log.count("pushes_offline")
            return False
        return self.send(conn, topic, event, payload)

    def supersede(
        self,
        conn: Connection,
        *,
        reason: str = "superseded",
        message: str = "Superseded by a newer connection for this agent",
        retryable: bool = False,
        retry_after: int | None = None,
    ) -> str:
        """Push `supersede` on the connection's `agent_control` topic, close it with 1000
        after the policy's `supersede_close_delay`, and return the push's `correlation_id`."""
        correlation_id = f"sup-{uuid.uuid4().hex}"
        payload = Supersede(
            reason=reason,
            message=message,
            retryable=retryable,
            retry_after=retry_after,
            target_socket_id=conn.socket_id,
            correlation_id=correlation_id,
        )
        self.send(conn, f"agent_control:{conn.agent_id}", "supersede", payload)
        self._log.count("superseded")
        conn.end(f"superseded: {reason}")
        conn.close(1000, "superseded", delay=self.policy.supersede_close_delay)
        return correlation_id

    def broadcast(self, topic: str, event: str, payload: Any) -> int:
        """Push to every live connection that has joined `topic`."""
        sent = 0
        for conn in list(self._subscribers.get(topic, ())):
            if self.live.get(conn.agent_id) is conn:
                sent += self.send(conn, topic, event, payload)
        return sent
