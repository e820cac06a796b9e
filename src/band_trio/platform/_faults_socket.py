"""Websocket faults: drop or close a live socket, refuse upgrades or joins, mute
heartbeats, push `supersede`.

The hot path stays cheap: with nothing armed, an upgrade pays one int check
(`faults.upgrades`), a join one dict truthiness check (`faults.joins`) and a
heartbeat one bool check (`faults.muting`).
"""

from __future__ import annotations

import math
import os
import socket
import stat
import uuid
from dataclasses import dataclass

from ._fault_log import (
    FaultLog,
    check_count,
    check_retry_after,
    check_status,
    error_code,
    retry_after_header,
)
from ._hub import Connection, Hub
from ._log import logger
from ._responses import Response, error_body

__all__ = ["JoinRefusal", "SocketFaults"]

_FD_DIRS = ("/proc/self/fd", "/dev/fd")
_UNSENDABLE_CLOSE_CODES = frozenset({1004, 1005, 1006, 1015})


@dataclass(eq=False, slots=True)
class JoinRefusal:
    """Joins of one topic refused: `remaining` more times, or until cleared (None)."""

    topic: str
    remaining: int | None
    reason: str


def _shutdown_tcp(local: tuple[str, int], peer: tuple[str, int]) -> bool:
    """Shut down (both ways, no close frame) the TCP socket of this process that
    connects `local` to `peer`. Works on a dup of the descriptor, so the server
    still owns (and closes) the original; its pending read simply sees EOF."""
    for directory in _FD_DIRS:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            try:
                fd = int(name)
                if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                    continue
                sock = socket.socket(fileno=os.dup(fd))
            except (ValueError, OSError):
                continue
            with sock:  # closes the dup only
                try:
                    if sock.type != socket.SOCK_STREAM:
                        continue
                    if sock.getpeername()[:2] != peer or sock.getsockname()[:2] != local:
                        continue
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    continue
                return True
        return False
    return False


class SocketFaults:
    """The websocket half of `Faults` (a mixin: `Faults` sets the state up)."""

    upgrades: int
    """Websocket upgrades still to refuse."""
    muting: bool
    """Whether any heartbeat is muted."""
    joins: dict[str, JoinRefusal]
    """Topics whose joins are refused (empty: nothing to check)."""
    _faults_log: FaultLog
    _hub: Hub
    _upgrade_status: int
    _upgrade_body: bytes | None
    _upgrade_retry_after: float | None
    _mute_all: bool
    _muted: set[str]

    def refuse_joins(
        self,
        topic: str,
        *,
        count: int | None = None,
        reason: str = "fault injected: join refused",
    ) -> None:
        """Refuse every agent's `phx_join` of `topic` with an error reply carrying
        `reason`: the next `count` joins, or all of them until `allow_joins`
        (or `clear`) when `count` is None. Replaces an earlier refusal of `topic`."""
        if not topic or ":" not in topic:
            raise ValueError(f"not a channel topic: {topic!r}")
        if count is not None:
            check_count(count)
        self.joins[topic] = JoinRefusal(topic, count, reason)

    def allow_joins(self, topic: str | None = None) -> None:
        """Lift the join refusal of `topic`, or of every topic."""
        if topic is None:
            self.joins.clear()
        else:
            self.joins.pop(topic, None)

    def take_join(self, topic: str, agent_id: str) -> str | None:
        """The refusal reason for this join if one is armed (consuming one), else None."""
        refusal = self.joins.get(topic)
        if refusal is None:
            return None
        if refusal.remaining is not None:
            refusal.remaining -= 1
            if refusal.remaining <= 0:
                del self.joins[topic]
        self._faults_log.note(
            f"fault: refuse_join {topic}", "faults_joins_refused", agent_id=agent_id
        )
        return refusal.reason

    def drop_socket(self, agent_id: str) -> bool:
        """Cut the agent's live socket's TCP connection without a close frame.

        The client sees EOF (an abnormal closure, 1006). Returns whether the
        agent had a live socket.
        """
        conn = self._hub.live.get(agent_id)
        if conn is None:
            return False
        conn.closing = True  # no close frame from now on
        conn.end("dropped by fault injection (TCP cut, no close frame)")
        self._faults_log.note(
            f"fault: drop_socket {agent_id}", "faults_sockets_dropped", agent_id=agent_id
        )
        if (
            conn.client is None
            or conn.server is None
            or not _shutdown_tcp(conn.server, conn.client)
        ):
            logger.warning("drop_socket: TCP socket of %s not found; cancelling it", agent_id)
            conn.nursery.cancel_scope.cancel(reason="drop_socket")
        return True

    def close_socket(self, agent_id: str, code: int, reason: str = "") -> bool:
        """Close the agent's live socket with `code` (and `reason`).

        Returns whether there was a live socket (not already closing) to close.
        """
        if (
            isinstance(code, bool)
            or not isinstance(code, int)
            or not 1000 <= code <= 4999
            or code in _UNSENDABLE_CLOSE_CODES
        ):
            raise ValueError(f"{code!r} is not a close code a server can send")
        if len(reason.encode()) > 123:
            raise ValueError("a close reason is at most 123 bytes of UTF-8")
        conn = self._hub.live.get(agent_id)
        if conn is None or conn.closing:
            return False
        self._faults_log.note(
            f"fault: close_socket {agent_id} {code}", "faults_sockets_closed", agent_id=agent_id
        )
        conn.close(code, reason)
        return True

    def refuse_upgrades(
        self,
        count: int,
        status: int,
        *,
        body: bytes | None = None,
        retry_after: float | None = None,
    ) -> None:
        """Refuse the next `count` websocket upgrades (any agent, before authentication)
        with `status`: an error envelope body unless `body` is given, a `Retry-After`
        header (and `retry_after` in the envelope) if `retry_after` is given.
        Replaces any earlier `refuse_upgrades`."""
        check_count(count)
        check_status(status, 400)
        check_retry_after(retry_after)
        self.upgrades = count
        self._upgrade_status = status
        self._upgrade_body = body
        self._upgrade_retry_after = retry_after

    def take_upgrade(self, path: str) -> Response | None:
        """The refusal for this upgrade if one is armed (consuming it), else None."""
        if self.upgrades <= 0:
            return None
        self.upgrades -= 1
        status, retry_after = self._upgrade_status, self._upgrade_retry_after
        self._faults_log.note(
            f"fault: refuse_upgrade {status}", "faults_upgrades_refused",
            method="GET", path=path, status=status,
        )  # fmt: skip
        body = self._upgrade_body
        if body is None:
            body = error_body(
                error_code(status),
                f"fault injected: upgrade refused with {status}",
                f"ws-{uuid.uuid4().hex[:12]}",
                retry_after=None if retry_after is None else math.ceil(retry_after),
            )
        headers = () if retry_after is None else (retry_after_header(retry_after),)
        return Response(status, body, headers)

    def mute_heartbeats(self, agent_id: str | None = None, muted: bool = True) -> None:
        """Stop (or resume) answering `heartbeat` frames for one agent, or for all.

        `mute_heartbeats(None, False)` resumes every agent; `mute_heartbeats(a,
        False)` undoes only `a`'s own mute, not a mute of all.
        """
        if agent_id is None:
            self._mute_all = muted
            if not muted:
                self._muted.clear()
        elif muted:
            self._muted.add(agent_id)
        else:
            self._muted.discard(agent_id)
        self.muting = self._mute_all or bool(self._muted)

    def drop_heartbeat(self, agent_id: str) -> bool:
        """Whether this agent's heartbeat goes unanswered (noted and counted if so)."""
        if not (self._mute_all or agent_id in self._muted):
            return False
        self._faults_log.note(
            "fault: heartbeat muted", "faults_heartbeats_dropped", agent_id=agent_id
        )
        return True

    def supersede(
        self,
        agent_id: str,
        *,
        retryable: bool = False,
        reason: str = "superseded",
        message: str = "Superseded by the platform (fault injection)",
        retry_after: int | None = None,
    ) -> str:
        """Push `supersede` on the agent's `agent_control` (with its current join_ref)
        and close the socket with 1000 after 1 s; return the `correlation_id`."""
        conn: Connection | None = self._hub.live.get(agent_id)
        if conn is None:
            raise LookupError(f"agent {agent_id} has no live socket")
        correlation_id = self._hub.supersede(
            conn, reason=reason, message=message, retryable=retryable, retry_after=retry_after
        )
        self._faults_log.note(
            f"fault: supersede {agent_id}", "faults_superseded", agent_id=agent_id
        )
        return correlation_id
