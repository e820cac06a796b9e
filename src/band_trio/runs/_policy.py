"""Every duration and count of the runs API, in one frozen object.

Kept beside the runs API rather than in `band_trio.policy`: it is the server's,
not an agent's, and nothing else reads it. Code never writes a literal wait:
it reads a field of the `RunsPolicy` it was given and sets a deadline on a
cancel scope. The defaults are Hermes Agent 0.19's where it has one, and a
bounded stop wait (5 s) where Hermes has none (docs/how-to/runs-api.md).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..policy import ServerPolicy

__all__ = ["RunsPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunsPolicy:
    """Durations (seconds) and counts of one runs API server. `replace()` derives."""

    # -- admission -----------------------------------------------------------
    max_concurrent_runs: int = 10
    """Runs not yet settled (queued, running, stopping) at once; one more is 429."""
    max_body: int = 1024 * 1024
    """Bytes of a request body the server reads; a longer one is 413, unread."""

    # -- stopping (docs/how-to/runs-api.md) -----------------------------------
    stop_wait: float = 5.0
    """`POST /stop?wait=true` answers once the run settled or this long after the stop,
    whichever is first; a run still going then is reported `overrun`."""
    backend_stop_grace: float = 5.0
    """Shielded time one remote stop of a run gets (`Turn.remote`), as for a room's turn."""
    subprocess_kill_grace: float = 2.0
    """`run_command` in a run: SIGTERM to the process group, then SIGKILL this long after."""
    run_deadline: float = math.inf
    """A run still going this long after it started is cancelled and fails. None by default."""
    hook_deadline: float = 10.0
    """Deadline of `Adapter.on_room_left` when a session expires (shielded)."""

    # -- what is kept ----------------------------------------------------------
    retention: float = 3600.0
    """A settled run's status and events stay readable this long (Hermes: 3600 s)."""
    max_retained_runs: int = 1000
    """Settled runs kept at most; past it the oldest is forgotten before its window ends."""
    max_events_per_run: int = 10_000
    """Events one run keeps for re-attach; past it the oldest are dropped (a re-attach
    from before the first kept one gets what is left, from its start)."""
    max_event_text: int = 64 * 1024
    """Characters of one `reasoning.available` or `status.update` text kept (the rest is
    cut): with `max_events_per_run`, what bounds a run's events. Replies are bounded by
    the output (`contract.MAX_ANSWER_CHARS`), tool previews by 200 characters."""
    max_session_messages: int = 200
    """Messages a session keeps as the history its next run sees."""
    idempotency_retention: float = 3600.0
    """An `Idempotency-Key` names its run this long after the start (and never longer
    than the run is kept): a retry within it is the same run. Hermes keeps keys 24 h in
    sqlite; here they live in memory, with the runs they name."""
    max_idempotency_keys: int = 1000
    """Keys remembered at most; past it the oldest is forgotten (its key starts anew)."""
    max_list_page: int = 100
    """Runs one `GET /v1/runs` page holds at most (`limit`, 20 by default)."""
    max_guidance_per_run: int = 16
    """Steers (`POST /steer`) waiting for a run's adapter to take them; one more is 429."""
    max_guidance_chars: int = 8000
    """Characters of one steer's text; a longer one is 413."""

    # -- the event stream ---------------------------------------------------------
    keepalive: float = 30.0
    """An event stream silent this long gets a `: keepalive` comment (Hermes: 30 s)."""
    shutdown_grace: float = 5.0
    """On SIGINT/SIGTERM runs are stopped and get this long to settle; then the server
    closes (in-flight requests get `request_grace`)."""
    request_grace: float = 1.0
    """hypercorn's `graceful_timeout`: in-flight requests at the close..."""
    close_margin: float = 1.0
    """...then this for hypercorn to close its sockets. `band-trio runs-api` gives up
    on runs that ignore the stop (and exits 1) twice this long after every grace."""
    listen_backlog: int = 1024
    """The listening socket's backlog."""
    server: ServerPolicy = dataclasses.field(default_factory=ServerPolicy)
    """How the server bounds what it sends: a subscriber that never reads is dropped
    after `send_stall`, and holds at most one `send_chunk` meanwhile."""

    def replace(self, **changes: float | int) -> RunsPolicy:
        """A copy with some fields changed (`RunsPolicy().replace(stop_wait=1.0)`)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "server":
                if not isinstance(value, ServerPolicy):
                    raise ValueError(f"RunsPolicy.server must be a ServerPolicy, got {value!r}")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"RunsPolicy.{field.name} must be a number >= 0, got {value!r}")
        for name in (
            "max_concurrent_runs",
            "max_body",
            "max_retained_runs",
            "max_events_per_run",
            "max_event_text",
            "max_session_messages",
            "max_idempotency_keys",
            "max_list_page",
            "max_guidance_per_run",
            "max_guidance_chars",
            "listen_backlog",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"RunsPolicy.{name} must be >= 1")
