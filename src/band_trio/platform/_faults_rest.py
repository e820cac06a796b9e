"""REST faults: fail, hold, delay or drop the next calls of one agent route.

The hot path stays cheap: with nothing armed, a REST request pays one list
truthiness check (`faults.rest`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Literal

import trio

from ..server import HttpError
from ._fault_log import (
    FaultLog,
    check_count,
    check_retry_after,
    check_status,
    error_code,
    retry_after_header,
)
from ._responses import Response, error_body

__all__ = ["REST_ROUTES", "Hold", "Intercepted", "RestFault", "RestFaults"]

REST_ROUTES = (
    "me", "chats", "next", "processing", "processed", "failed", "activity", "post_message",
    "post_event", "participants", "context", "list_messages",
)  # fmt: skip
"""The stable name of every agent REST route, as `fail_rest`/`hold_rest`/`delay_rest` take it."""

Action = Literal["fail", "hold", "delay", "drop"]


class Hold:
    """Requests held open by `Faults.hold_rest` until `release()`.

    `arrived` is set when the first held request arrives; `held` counts the
    requests held so far (it does not go down on release).
    """

    def __init__(self, route: str) -> None:
        self.id = f"hold-{uuid.uuid4().hex[:12]}"
        """Names the hold for `POST /_admin/faults/release`."""
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


class RestFaults:
    """The REST half of `Faults` (a mixin: `Faults` sets the state up)."""

    rest: list[RestFault]
    """Armed REST faults, oldest first (empty: nothing to check)."""
    processed_terminal: bool
    """`keep_processed` is on: a claim of a `processed` message is refused."""
    _faults_log: FaultLog
    _holds: list[Hold]

    @property
    def holds(self) -> list[Hold]:
        """The holds not yet released, oldest first."""
        return list(self._holds)

    def hold(self, hold_id: str) -> Hold:
        """The unreleased hold named `hold_id` (`LookupError` if there is none)."""
        for hold in self._holds:
            if hold.id == hold_id:
                return hold
        raise LookupError(f"no hold {hold_id!r} (unknown or already released)")

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
        check_status(status, 200)
        check_retry_after(retry_after)
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

    def drop_rest(
        self,
        route: str,
        *,
        count: int = 1,
        room_id: str | None = None,
        message_id: str | None = None,
        agent_id: str | None = None,
    ) -> None:
        """Handle the next `count` matching requests (a post is stored, a mark lands),
        then cut the connection without an answer: a platform that died between doing
        the work and saying so. The client cannot tell it from one whose request never
        arrived, which is what its reconciliation is for."""
        self._arm(
            RestFault(
                route, "drop", count, room_id=room_id, message_id=message_id, agent_id=agent_id
            )
        )

    def keep_processed(self, on: bool = True) -> None:
        """Make `processed` terminal, stricter than the API documents: while on, a
        `/processing` of a message the agent has `processed` is answered 409
        `already_processed` and changes nothing, instead of opening a new attempt.
        A test that wants a late claim to be harmless turns it on; by default the
        platform re-opens the message, as the real one does. `clear()` turns it off."""
        self.processed_terminal = on

    def refused_reopen(self, agent_id: str, path: str) -> None:
        """`keep_processed` refused a claim: noted and counted as a fault."""
        self._faults_log.note(
            "fault: keep_processed", "faults_reopens_refused",
            agent_id=agent_id, method="POST", path=path, status=409,
        )  # fmt: skip

    def _arm(self, fault: RestFault) -> None:
        if fault.route not in REST_ROUTES:
            raise ValueError(f"unknown route {fault.route!r}; one of {', '.join(REST_ROUTES)}")
        check_count(fault.remaining)
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
        query: str | None = None,
        agent_id: str | None,
        request_id: str,
    ) -> Response | None:
        """Apply the fault to a caught request: answer it, hold/delay then handle it,
        or (None) handle it and leave it unanswered: the caller cuts the connection.

        Its note names the request as sent, `query` (the query string) included: of a
        dropped request, the note is the only entry in the request log."""
        fault = caught.fault
        if fault.action == "drop":
            self._faults_log.note(
                f"fault: drop_rest {caught.route}", "faults_rest_dropped",
                agent_id=agent_id, method=method, path=path, query=query,
            )  # fmt: skip
            with suppress(HttpError):  # refused (a stopped room, no attempt): as it is
                caught.handle()
            return None
        if fault.action == "fail":
            self._faults_log.note(
                f"fault: fail_rest {caught.route} {fault.status}", "faults_rest_failed",
                agent_id=agent_id, method=method, path=path, query=query, status=fault.status,
            )  # fmt: skip
            headers = () if fault.retry_after is None else (retry_after_header(fault.retry_after),)
            body = fault.body
            if body is None:
                body = error_body(
                    error_code(fault.status),
                    f"fault injected: {caught.route} answers {fault.status}",
                    request_id,
                    retry_after=None if fault.retry_after is None else math.ceil(fault.retry_after),
                )
            return Response(fault.status, body, headers)
        if fault.action == "delay":
            self._faults_log.note(
                f"fault: delay_rest {caught.route} {fault.delay:g}s", "faults_rest_delayed",
                agent_id=agent_id, method=method, path=path, query=query,
            )  # fmt: skip
            await trio.sleep(fault.delay)
            return caught.handle()
        hold = fault.hold
        assert hold is not None
        hold.held += 1
        self._faults_log.note(
            f"fault: hold_rest {caught.route} #{hold.held}", "faults_rest_held",
            agent_id=agent_id, method=method, path=path, query=query,
        )  # fmt: skip
        hold.arrived.set()
        await hold._released.wait()
        return caught.handle()
