"""Fault injection: break the platform on purpose, so runtime tests can watch recovery.

`platform.faults` (a `Faults`) arms REST faults (fail, hold, delay) per route,
refuses websocket upgrades, drops or closes a live socket, mutes heartbeats and
pushes `supersede`. Every fault that takes effect is appended to the request
log as a `note` whose body starts with `"fault:"`, and counted in the stats
(`faults` plus one `faults_*` counter per kind).

The hot path stays cheap: with nothing armed, a REST request pays one list
truthiness check (`faults.rest`), an upgrade one int check (`faults.upgrades`)
and a heartbeat one bool check (`faults.muting`).
"""

from __future__ import annotations

import math
import os
import socket
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from time import perf_counter
from typing import Literal

import trio

from ._http import Response, error_body
from ._hub import Connection, Hub
from ._log import RequestLog, logger

__all__ = ["REST_ROUTES", "Faults", "Hold", "Intercepted", "RestFault"]

REST_ROUTES = (
    "me", "chats", "next", "processing", "processed", "failed", "activity", "post_message",
    "post_event", "participants", "context", "list_messages",
)  # fmt: skip
"""The stable name of every agent REST route, as `fail_rest`/`hold_rest`/`delay_rest` take it."""

_FD_DIRS = ("/proc/self/fd", "/dev/fd")
_UNSENDABLE_CLOSE_CODES = frozenset({1004, 1005, 1006, 1015})

Action = Literal["fail", "hold", "delay"]


class Hold:
    """Requests held open by `Faults.hold_rest` until `release()`.

    `arrived` is set when the first held request arrives; `held` counts the
    requests held so far (it does not go down on release).
    """

    def __init__(self, route: str) -> None:
        self.route = route
        self.arrived = trio.Event()
        self.held = 0
        self._released = trio.Event()
        self._disarm: Callable[[], None] = lambda: None

    @property
    def released(self) -> bool:
        return self._released.is_set()

    def release(self) -> None:
        """Let every held request proceed (handled normally); later matches pass."""
        self._released.set()
        self._disarm()


@dataclass(eq=False, slots=True)
class RestFault:
    """One armed REST fault: what to do to the next `remaining` matching requests."""

    route: str
    action: Action
    remaining: int
    status: int = 0
    body: bytes | None = None
    retry_after: float | None = None
    delay: float = 0.0
    hold: Hold | None = None
    room_id: str | None = None
    message_id: str | None = None
    agent_id: str | None = None

    def matches(
        self, route: str, room_id: str | None, message_id: str | None, agent_id: str
    ) -> bool:
        return (
            self.route == route
            and (self.room_id is None or self.room_id == room_id)
            and (self.message_id is None or self.message_id == message_id)
            and (self.agent_id is None or self.agent_id == agent_id)
        )


@dataclass(frozen=True, slots=True)
class Intercepted:
    """A REST request a fault caught: `handle()` runs it as if nothing had happened."""

    fault: RestFault
    route: str
    handle: Callable[[], Response]


def _retry_after_header(retry_after: float) -> tuple[bytes, bytes]:
    text = str(int(retry_after)) if float(retry_after).is_integer() else f"{retry_after:g}"
    return (b"retry-after", text.encode())


def _error_code(status: int) -> str:
    if status == 409:
        return "connection_conflict"
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return f"http_{status}"
    return phrase.lower().replace(" ", "_").replace("-", "_")


def _check_status(status: int, low: int) -> None:
    if isinstance(status, bool) or not isinstance(status, int) or not low <= status <= 599:
        raise ValueError(f"status must be an integer from {low} to 599, not {status!r}")


def _check_count(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, not {count!r}")


def _check_retry_after(retry_after: float | None) -> None:
    if retry_after is not None and not (math.isfinite(retry_after) and retry_after >= 0):
        raise ValueError(f"retry_after must be a finite number >= 0, not {retry_after!r}")


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


class Faults:
    """The fault injector at `platform.faults`; also driven by `POST /_admin/faults/...`.

    Unknown routes, statuses out of range and the like raise `ValueError`;
    `supersede` on an agent without a live socket raises `LookupError`.
    """

    def __init__(self, log: RequestLog, hub: Hub) -> None:
        self.rest: list[RestFault] = []
        """Armed REST faults, oldest first (empty: nothing to check)."""
        self.upgrades = 0
        """Websocket upgrades still to refuse."""
        self.muting = False
        """Whether any heartbeat is muted."""
        self._log = log
        self._hub = hub
        self._upgrade_status = 503
        self._upgrade_body: bytes | None = None
        self._upgrade_retry_after: float | None = None
        self._mute_all = False
        self._muted: set[str] = set()
        self._holds: list[Hold] = []

    # -- REST -----------------------------------------------------------------

    def fail_rest(
        self,
        route: str,
        status: int,
        *,
        count: int = 1,
        body: bytes | None = None,
        retry_after: float | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        """Answer the next `count` matching requests with `status` without handling them.

        The body is the error envelope unless `body` is given; `retry_after`
        adds a `Retry-After` header (and `retry_after` to the envelope).
        """
        _check_status(status, 200)
        _check_retry_after(retry_after)
        self._arm(
            RestFault(
                route, "fail", count, status=status, body=body, retry_after=retry_after,
                room_id=room_id, message_id=message_id, agent_id=agent_id,
            )
        )  # fmt: skip

    def hold_rest(
        self,
        route: str,
        *,
        count: int = 1,
        room_id: str | None = None,
        message_id: str | None = None,
        agent_id: str | None = None,
    ) -> Hold:
        """Hold the next `count` matching requests open until `Hold.release()`."""
        hold = Hold(route)
        fault = RestFault(
            route, "hold", count, hold=hold, room_id=room_id, message_id=message_id,
            agent_id=agent_id,
        )  # fmt: skip
        self._arm(fault)
        self._holds.append(hold)

        def disarm() -> None:
            self._disarm(fault)
            if hold in self._holds:
                self._holds.remove(hold)

        hold._disarm = disarm
        return hold

    def delay_rest(
        self,
        route: str,
        seconds: float,
        *,
        count: int = 1,
        room_id: str | None = None,
        message_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        """Handle the next `count` matching requests normally, `seconds` late."""
        if not (math.isfinite(seconds) and seconds >= 0):
            raise ValueError(f"seconds must be a finite number >= 0, not {seconds!r}")
        self._arm(
            RestFault(
                route, "delay", count, delay=seconds, room_id=room_id, message_id=message_id,
                agent_id=agent_id,
            )
        )  # fmt: skip

    def _arm(self, fault: RestFault) -> None:
        if fault.route not in REST_ROUTES:
            raise ValueError(f"unknown route {fault.route!r}; one of {', '.join(REST_ROUTES)}")
        _check_count(fault.remaining)
        self.rest.append(fault)

    def _disarm(self, fault: RestFault) -> None:
        if fault in self.rest:
            self.rest.remove(fault)

    def take_rest(
        self, route: str, room_id: str | None, message_id: str | None, agent_id: str
    ) -> RestFault | None:
        """The armed fault this request triggers (consuming one of its count), if any."""
        for fault in self.rest:
            if fault.matches(route, room_id, message_id, agent_id):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self.rest.remove(fault)
                return fault
        return None

    async def run_rest(
        self,
        caught: Intercepted,
        *,
        method: str,
        path: str,
        agent_id: str | None,
        request_id: str,
    ) -> Response:
        """Apply the fault to a caught request: answer it, or hold/delay then handle it."""
        fault = caught.fault
        if fault.action == "fail":
            self._note(
                f"fault: fail_rest {caught.route} {fault.status}", "faults_rest_failed",
                agent_id=agent_id, method=method, path=path, status=fault.status,
            )  # fmt: skip
            headers = () if fault.retry_after is None else (_retry_after_header(fault.retry_after),)
            body = fault.body
            if body is None:
                body = error_body(
                    _error_code(fault.status),
                    f"fault injected: {caught.route} answers {fault.status}",
                    request_id,
                    retry_after=None if fault.retry_after is None else math.ceil(fault.retry_after),
                )
            return Response(fault.status, body, headers)
        if fault.action == "delay":
            self._note(
                f"fault: delay_rest {caught.route} {fault.delay:g}s", "faults_rest_delayed",
                agent_id=agent_id, method=method, path=path,
            )  # fmt: skip
            await trio.sleep(fault.delay)
            return caught.handle()
        hold = fault.hold
        assert hold is not None
        hold.held += 1
        self._note(
            f"fault: hold_rest {caught.route} #{hold.held}", "faults_rest_held",
            agent_id=agent_id, method=method, path=path,
        )  # fmt: skip
        hold.arrived.set()
        await hold._released.wait()
        return caught.handle()

    # -- websocket ------------------------------------------------------------

    def drop_socket(self, agent_id: str) -> bool:
        """Cut the agent's live socket's TCP connection without a close frame.

        The client sees EOF (an abnormal closure, 1006). Returns whether the
        agent had a live socket.
        """
        conn = self._hub.live.get(agent_id)
        if conn is None:
            return False
        conn.closing = True  # no close frame from now on
        self._note(f"fault: drop_socket {agent_id}", "faults_sockets_dropped", agent_id=agent_id)
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
        self._note(
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
        _check_count(count)
        _check_status(status, 400)
        _check_retry_after(retry_after)
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
        self._note(
            f"fault: refuse_upgrade {status}", "faults_upgrades_refused",
            method="GET", path=path, status=status,
        )  # fmt: skip
        body = self._upgrade_body
        if body is None:
            body = error_body(
                _error_code(status),
                f"fault injected: upgrade refused with {status}",
                f"ws-{uuid.uuid4().hex[:12]}",
                retry_after=None if retry_after is None else math.ceil(retry_after),
            )
        headers = () if retry_after is None else (_retry_after_header(retry_after),)
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
        self._note("fault: heartbeat muted", "faults_heartbeats_dropped", agent_id=agent_id)
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
        self._note(f"fault: supersede {agent_id}", "faults_superseded", agent_id=agent_id)
        return correlation_id

    # -- all ------------------------------------------------------------------

    def clear(self) -> None:
        """Disarm everything and release every held request."""
        self.rest = []
        for hold in list(self._holds):
            hold.release()
        self.upgrades = 0
        self._mute_all = False
        self._muted.clear()
        self.muting = False

    def _note(
        self,
        body: str,
        counter: str,
        *,
        agent_id: str | None = None,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
    ) -> None:
        self._log.count("faults")
        self._log.count(counter)
        self._log.append(
            "note", perf_counter(), agent_id=agent_id, method=method, path=path, status=status,
            body=body,
        )  # fmt: skip
