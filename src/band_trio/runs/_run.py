"""One run as the server keeps it: its scope while it is live, its record after.

A run is a unit of work in the server's nursery (`RunsService`), shaped like a
room's turn: a cancel scope that a stop cancels (with the stop's reason), a
`TurnControl` that its remote work reads the abort from — told *before* the
cancel, so a start call in flight is bounded and its work stopped once its
handle is known — and an event log. `Run.stop` is synchronous: it records
the reason, tells the control, cancels the scope, and returns; nothing waits
for the adapter on the stop's path. A stop that lands before the run entered
its scope (still queued behind its session's previous run, or not yet
scheduled) cancels the scope all the same: trio applies it on entry.

Once the run has settled its live parts (`scope`, `control` and the remote
works' handles) are dropped; the record — status, output, the remote stops'
outcomes, the events — stays for the retention window.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import trio

from ..contract import MAX_ANSWER_CHARS, Message, RemoteStop, StopOutcome, Threads, TurnControl
from ._approvals import Approvals
from ._events import EventLog
from ._guidance import Guidance
from ._policy import RunsPolicy
from ._request import RunRequest
from ._session import Session

__all__ = ["Run", "RunStatus", "summarise"]


class RunStatus(enum.Enum):
    """Hermes' statuses, `waiting_for_approval` included, and `interrupted`: the server
    shut down before the run ended (Hermes #114774)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING_FOR_APPROVAL = "waiting_for_approval"
    STOPPING = "stopping"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


_STEERABLE = frozenset({RunStatus.RUNNING, RunStatus.WAITING_FOR_APPROVAL})
_WORST = (StopOutcome.UNCONFIRMED, StopOutcome.REQUESTED, StopOutcome.CONFIRMED)


def summarise(stops: Sequence[RemoteStop]) -> str | None:
    """The outcome of a run's remote stops taken together (the least sure one wins);
    None if the run had no remote work left to stop."""
    for outcome in _WORST:
        if any(stop.outcome is outcome for stop in stops):
            return outcome.value
    return None


@dataclass(slots=True)
class _Live:
    scope: trio.CancelScope
    control: TurnControl


class Run:
    """A run: live parts while it runs, a record once it settled."""

    __slots__ = (
        "_live",
        "_output",
        "_output_chars",
        "_subscribers_changed",
        "approvals",
        "began",
        "cancel_reason",
        "created_at",
        "error",
        "events",
        "expires_at",
        "finished",
        "forgotten",
        "guidance",
        "id",
        "max_event_text",
        "message",
        "model",
        "remote_stops",
        "request",
        "session",
        "settled",
        "settled_at",
        "status",
        "stop_requested_at",
        "stop_wait",
        "subscribers",
        "updated_at",
    )

    def __init__(
        self,
        run_id: str,
        request: RunRequest,
        session: Session,
        model: str,
        policy: RunsPolicy,
        threads: Threads | None = None,
    ) -> None:
        self.id = run_id
        self.request = request
        self.session = session
        self.model = request.model or model
        self.message = Message(
            id=run_id,
            room_id=session.id,
            content=request.input,
            sender_id="user",
            sender_type="User",
            sender_name="API client",
        )
        control = TurnControl(
            session.id,
            run_id,
            stop_grace=policy.backend_stop_grace,
            kill_grace=policy.subprocess_kill_grace,
            threads=threads,
        )
        self._live: _Live | None = _Live(trio.CancelScope(), control)
        self.events = EventLog(run_id, policy.max_events_per_run)
        self.approvals = Approvals(self.events, self._waiting)
        """Its adapter's questions, as Hermes' approvals (`_approvals`)."""
        self.guidance = Guidance(run_id, session.id, policy.max_guidance_per_run)
        """What its client offered it (`POST /steer`), until its adapter takes it."""
        self.status = RunStatus.QUEUED
        self.created_at = self.updated_at = time.time()
        self.stop_wait = policy.stop_wait
        self.max_event_text = policy.max_event_text
        self.stop_requested_at: float | None = None
        """When (trio clock) the first stop landed."""
        self.cancel_reason: str | None = None
        self.began = False
        """The run reached its adapter (it was not stopped while still queued)."""
        self.finished = False
        """The adapter returned or raised: a stop after that stops nothing."""
        self.error: str | None = None
        self.remote_stops: tuple[RemoteStop, ...] = ()
        self.settled = trio.Event()
        """Set once the run's scope has exited, its remote stops settled, and its
        terminal event is in the log."""
        self.settled_at: float | None = None
        self.expires_at = float("inf")
        self.forgotten = trio.Event()
        """Set once its retention window ended (or it was evicted): it answers 404 now."""
        self.subscribers = 0
        """Event streams of this run being served right now."""
        self._subscribers_changed = trio.Event()
        self._output: list[str] = []
        self._output_chars = 0

    # -- live ----------------------------------------------------------------------

    @property
    def scope(self) -> trio.CancelScope:
        assert self._live is not None, "a settled run has no scope"
        return self._live.scope

    @property
    def control(self) -> TurnControl:
        assert self._live is not None, "a settled run has no control"
        return self._live.control

    @property
    def is_live(self) -> bool:
        return self._live is not None

    def stop(self, reason: str | None) -> bool:
        """Cancel the run with `reason`. The first stop wins; False if this one did
        nothing (stopped already, finished, or settled)."""
        if self._live is None or self.finished or self.stop_requested_at is not None:
            return False
        self.stop_requested_at = trio.current_time()
        self.cancel_reason = reason
        self._set(RunStatus.STOPPING)
        self._live.control.aborted("stop", reason)  # before the cancel: starts get bounded
        self._live.scope.cancel(reason=f"stop: {reason}" if reason else "stop")
        return True

    def subscribe(self, change: int) -> None:
        """An event stream of this run began (+1) or ended (-1)."""
        self.subscribers += change
        self._subscribers_changed.set()
        self._subscribers_changed = trio.Event()

    async def wait_subscribers_changed(self) -> None:
        """Return when an event stream of this run begins or ends (for a client, or a
        test, that must know the server saw a subscriber go)."""
        await self._subscribers_changed.wait()

    def begin(self) -> None:
        """The run's session is free: its adapter is called now."""
        self.began = True
        if self.status is RunStatus.QUEUED:
            self._set(RunStatus.RUNNING)

    def _waiting(self, waiting: bool) -> None:
        """An approval became pending (True) or ended (False); a stop's status wins."""
        if waiting and self.status is RunStatus.RUNNING:
            self._set(RunStatus.WAITING_FOR_APPROVAL)
        elif not waiting and self.status is RunStatus.WAITING_FOR_APPROVAL:
            self._set(RunStatus.RUNNING)

    @property
    def steerable(self) -> bool:
        """Whether guidance offered now can still reach the adapter (Hermes: 409 if not)."""
        return self.is_live and not self.finished and self.status in _STEERABLE

    def add_output(self, text: str) -> str:
        """Keep `text` as part of the output (bounded); what was kept of it."""
        room = MAX_ANSWER_CHARS - self._output_chars
        kept = text[: max(0, room)]
        if kept:
            self._output.append(kept)
            self._output_chars += len(kept)
        return kept

    @property
    def output(self) -> str:
        return "".join(self._output)

    @property
    def has_output(self) -> bool:
        return self._output_chars > 0

    def settle(self, status: RunStatus, retention: float) -> None:
        """The run is over: record how, drop the live parts, start the retention window."""
        assert self._live is not None
        self.remote_stops = tuple(self._live.control.stops)
        self._live = None
        # what only the live run reads goes too: the record is kept for an hour
        self.request = dataclasses.replace(self.request, history=(), instructions=None)
        self._set(status)
        now = trio.current_time()
        self.settled_at = now
        self.expires_at = now + retention
        self.settled.set()

    def _set(self, status: RunStatus) -> None:
        self.status = status
        self.updated_at = time.time()

    # -- what clients read -----------------------------------------------------------

    @property
    def overrun(self) -> bool:
        """Whether the run went on past the stop's bounded wait (`RunsPolicy.stop_wait`):
        its adapter did not let the cancel through in time."""
        if self.stop_requested_at is None:
            return False
        end = self.settled_at if self.settled_at is not None else trio.current_time()
        return end - self.stop_requested_at >= self.stop_wait

    def stop_fields(self) -> dict[str, Any]:
        """What a stop answer and a stopped run's status say about the stop."""
        fields: dict[str, Any] = {"cancel_reason": self.cancel_reason, "overrun": self.overrun}
        if self.settled_at is not None:
            fields["remote_stop"] = summarise(self.remote_stops)
            fields["remote_stops"] = [
                {
                    "name": stop.name,
                    "handle": stop.handle,
                    "outcome": stop.outcome.value,
                    "detail": stop.detail,
                    "took_ms": round(stop.took * 1000, 3),
                }
                for stop in self.remote_stops
            ]
        return fields

    def status_body(self) -> dict[str, Any]:
        """`GET /v1/runs/{id}`: Hermes' `hermes.run` object, plus the stop's fields."""
        last = self.events.last_event
        if self.status is RunStatus.STOPPING:
            last = "run.stopping"
        body: dict[str, Any] = {
            "object": "hermes.run",
            "run_id": self.id,
            "status": self.status.value,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "session_id": self.session.id,
            "model": self.model,
            "last_event": last,
        }
        if self.status is RunStatus.COMPLETED:
            body["output"] = self.output
            body["usage"] = USAGE
        elif self.status in (RunStatus.FAILED, RunStatus.INTERRUPTED):
            body["error"] = self.error
        elif self.status is RunStatus.WAITING_FOR_APPROVAL:
            body["approval"] = self.approvals.request
        if self.settled.is_set() and self.guidance.leftover is not None:
            body["pending_steer"] = self.guidance.leftover
        if self.stop_requested_at is not None:
            body.update(self.stop_fields())
        return body

    def stop_body(self) -> dict[str, Any]:
        """The answer to `POST /v1/runs/{id}/stop`: `stopping` while the run unwinds
        (Hermes' answer), the final state once it has settled."""
        body: dict[str, Any] = {
            "run_id": self.id,
            "status": self.status.value,
            "settled": self.settled.is_set(),
        }
        if self.stop_requested_at is not None or self.settled.is_set():
            body.update(self.stop_fields())
        if self.overrun and not self.settled.is_set():
            body["detail"] = (
                f"the run did not end within {self.stop_wait:g}s of the stop: "
                "its adapter has not let the cancel through"
            )
        return body


USAGE = None
"""`usage` is null: the adapter contract reports no token counts, and zeros would be
read by a client as measured."""
