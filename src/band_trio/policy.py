"""Every duration and count band-trio uses, in frozen objects.

`Policy` is the agent's (the runtime, the link); `UpstreamPolicy`, held in
`Policy.upstream`, is every client band-trio has of an upstream (the reference
adapters, the bridge's targets, an adapter author's own calls through
`band_trio.contract.call_upstream`); `PlatformPolicy` is the embedded
platform's (the server side); `ServerPolicy` is what every HTTP server of
band-trio shares (the platform, the runs API, the bridge's health and the host:
`band_trio.server`).

Code never writes a literal timeout: it reads a field of the `Policy` it was
given and sets a deadline on a cancel scope. The defaults are the bracketed
defaults of band-sdk 6.0.1 where it has one (docs/reference/runtime.md lists
them), so an agent with the default policy looks like band-sdk on the wire.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BusyPolicy",
    "PlatformPolicy",
    "Policy",
    "ServerPolicy",
    "UpstreamPolicy",
    "WhileBusy",
]

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamPolicy:
    """How a client of an upstream (a model provider, an A2A agent, OpenCode, a bridge
    target) retries, waits and reads: one rule for all of them (docs/reference/adapters.md).

    A failed attempt is asked again only if its fault is transient (408, 409, 429, 500,
    502, 503, 504, 529, no connection, a connection dropped or silent, a stream ended
    before its finish marker), no part of the answer was posted to the room meanwhile,
    and the turn was not interrupted or stopped. The wait is `Retry-After` (or
    `retry-after-ms`) when the upstream gives one, else exponential backoff with full
    jitter; it is a cancellable sleep inside the turn, and never reaches past the
    turn's deadline. Use `replace()` to derive."""

    # -- retries ---------------------------------------------------------------
    attempts: int = 3
    """Attempts of one call at most, the first included (OpenAI's SDK: 2 retries)."""
    retry_base: float = 0.5
    """Backoff without `Retry-After`: a wait drawn uniformly from [0, base * 2**n)..."""
    retry_cap: float = 8.0
    """...with the upper end capped here."""
    retry_after_cap: float = 60.0
    """The longest `Retry-After` waited for; a longer one fails the call at once, saying so."""

    # -- time -------------------------------------------------------------------
    connect_timeout: float = 10.0
    """Deadline of one connection to the upstream (and of waiting for a pooled one)."""
    read_timeout: float = 60.0
    """The longest silence of an upstream's answer or stream (and of one write): past it
    the attempt fails as stalled, and is retried under the rules above."""
    close_grace: float = 1.0
    """Shielded time to close a client's connections, or one response, after a cancel."""
    drain_grace: float = 1.0
    """After an answer's finish marker (`[DONE]`, a terminal A2A state), how long the rest
    of the stream may take to end before it is closed anyway."""
    discovery_deadline: float = 5.0
    """How long an A2A agent card may take (auto streaming); then streaming is assumed."""
    check_grace: float = 1.0
    """After an A2A error frame, how long `GetTask` may take to tell whether the task ended."""
    lookup_grace: float = 2.0
    """After the turn's first A2A request broke before naming its task, how long `ListTasks`
    may take to find the task it may have started (then it is reported, not asked again)."""
    confirm_share: float = 0.8
    """After a stop the peer accepted without a terminal state (A2A `CancelTask`), the
    share of the stop's remaining grace spent polling for one..."""
    confirm_cap: float = 5.0
    """...and at most this long (a stop run without a deadline)."""
    confirm_margin: float = 0.1
    """An OpenCode stop stops waiting for the run's end this long before its deadline, so
    an abort OpenCode accepted is reported `requested`, not as unanswered."""
    resettle_grace: float = 5.0
    """How long an OpenCode run that an unconfirmed stop left behind may take to end,
    aborted again before the room's next prompt."""

    # -- sizes ------------------------------------------------------------------
    max_body: int = 8 * MIB
    """Bytes of one whole (not streamed) answer body; past it the call fails and its
    connection is dropped."""
    max_error_body: int = 4096
    """Bytes of an error answer read for its message; the rest is not read (the
    connection is dropped)."""
    max_event: int = MIB
    """Bytes of one server-sent event of a stream (its lines together)."""
    max_answer_chars: int = 1_000_000
    """Characters of one assembled answer (a model's text, an A2A task's artifacts)."""
    event_buffer: int = 256
    """Events a stream's reader holds for its turn (the OpenCode adapter's, read by a
    task of its own); past it the reader waits: backpressure, never more memory."""

    def replace(self, **changes: float | int) -> UpstreamPolicy:
        """A copy with some fields changed (`UpstreamPolicy().replace(attempts=5)`)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        _check_numbers(self)
        counts = ("attempts", "max_body", "max_error_body", "max_event", "max_answer_chars")
        for name in (*counts, "event_buffer"):
            if getattr(self, name) < 1:
                raise ValueError(f"UpstreamPolicy.{name} must be >= 1")
        for name in ("connect_timeout", "read_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"UpstreamPolicy.{name} must be > 0")
        if self.confirm_share > 1:
            raise ValueError("UpstreamPolicy.confirm_share must be a share in [0, 1]")


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """Durations (seconds) and counts for one agent. Use `replace()` to derive."""

    # -- message lifecycle (docs/reference/runtime.md) -----------------------
    max_attempts: int = 1
    """Adapter runs allowed per message (band-sdk: max_message_retries, per process).
    The platform's count holds across restarts: a message it shows `failed` after this
    many attempts is never claimed again (a claim would open another), by this process
    or a later one; our own interrupts and stops give their attempt back."""
    completed_memory: int = 500
    """How many completed message ids each room remembers to skip duplicates."""
    reconcile_interval: float = 60.0
    """First periodic `/next` reconcile; it doubles while empty..."""
    reconcile_interval_max: float = 120.0
    """...up to this."""
    working_keep_alive: float = 3.0
    """`POST /activity {"working": true}` is repeated this often during a turn."""
    activity_request: float = 2.0
    """Deadline of one activity report; it is never retried."""

    # -- control signals (docs/discussion/cancellation.md) -------------------
    room_inbox: int = 1000
    """Pushed messages a room queues while a turn runs. One more drops the queue and
    asks for a `/next` pass instead, which finds the same messages, in order: a flood
    costs a bounded queue, never a lost message."""
    control_dedup_memory: int = 256
    """How many control-signal correlation ids are remembered."""
    stopped_probe_interval: float = 60.0
    """A stopped room probes `/next` this often to find a play it missed."""

    # -- deadlines for cleanup (docs/discussion/closing.md) ------------------
    cleanup_grace: float = 1.0
    """Shielded time a cancelled turn gets to settle (activity false, the consume mark
    of an interrupt: from the moment the mark has a REST connection, see `mark_wait`),
    and a room that is left or stopped gets to leave its topics."""
    settle_grace: float = 10.0
    """Shielded time a turn whose adapter finished gets for its `processed` or `failed`
    mark (and `working: false`), from the moment the mark has a connection. A mark
    that has not landed by then stays ack-pending: it is retried on the room's next
    pass, and `StopResult.unsettled` lists it."""
    mark_wait: float = 10.0
    """How long a final mark (and the rest of its settling) may wait for a free REST
    connection before its grace starts: `cleanup_grace` and `settle_grace` count from
    the moment the mark gets a connection, not from when it was queued, so a mass
    abort's thousand marks leave in one wave however long the platform takes for all
    of them. A mark still waiting past this stays ack-pending and is retried, as one
    that did not land. Not `request_deadline` (60 s): a settling is shielded, and
    holds its room and a graceful stop; 10 s is twice what a wave of 1,000 marks took
    on a loaded 2-core machine (docs/benchmarks.md, the scale rows). A hard stop cuts
    the wait as it cuts the grace."""
    backend_stop_grace: float = 5.0
    """Shielded time one remote stop gets (`Turn.remote`): the peer's answer, or
    `unconfirmed`. A start call still in flight when the turn is aborted gets as long
    to reveal its handle. The turn (and the room's next turn) waits for both."""
    adapter_threads: int = 16
    """Worker threads `run_in_thread` may use at once, the agent's own (not trio's
    shared limiter, which name lookups and spawns need). An abandoned thread keeps its
    slot until its call returns; a turn waiting for a slot is cancellable."""
    subprocess_kill_grace: float = 2.0
    """`run_command`: SIGTERM to the process group, then SIGKILL this long after."""
    ask_timeout: float = 600.0
    """How long `Turn.ask` waits for an answer unless the call says otherwise; then it
    takes the question's default (its last choice unless given) and tells the room."""
    turn_deadline: float = math.inf
    """A turn still running this long after its adapter started is cancelled and its
    message marked `failed` (its remote work stopped). None by default."""
    hook_deadline: float = 10.0
    """Deadline of `Adapter.on_started` and of `Adapter.on_room_left` (shielded)."""
    shutdown_grace: float = 30.0
    """`Agent.stop()` lets running turns finish (mark included) this long, then
    cancels them; their messages are left `processing`."""
    hard_stop_grace: float = 0.5
    """A hard stop (`Agent.hard_stop()`, a second SIGINT/SIGTERM) cuts every shielded
    wait of the rooms — remote starts and stops, marks, leaves — to this."""
    hard_stop_deadline: float = 1.0
    """The commands (`agent`, `bridge`, `host`) exit this long after a second signal
    whatever is still running (exit 1, naming it): an adapter that ignores the cancel
    cannot hold the process."""

    # -- REST ---------------------------------------------------------------
    post_wait: float = 300.0
    """How long one post of a turn (a reply, an event) waits for the platform, through
    outages and reconnects, before it fails: a post whose connection broke is matched
    among the room's messages once the platform answers again, and sent again only if
    it did not land (docs/discussion/closing.md). Inside the turn's own deadline."""
    post_retry_cap: float = 5.0
    """While a post waits for the platform, the longest pause between two tries (from
    `rest_retry_base`, doubling, with equal jitter): the post goes on within seconds
    of the platform's return."""
    request_deadline: float = 60.0
    """Deadline of one REST call (band-sdk uses 60 s)."""
    rest_max_retries: int = 3
    """Retries of a REST call answered 408, 429, 500, 502, 503 or 504."""
    rest_retry_base: float = 1.0
    """Without a `Retry-After`, retry n waits a time drawn uniformly from
    [w/2, w), w = base * 2**n (equal jitter: the retries always span half their schedule,
    so a call outlasts a short platform outage)..."""
    rest_retry_cap: float = 60.0
    """...with its upper end capped here. A `Retry-After` longer than this is not waited
    for: the call fails at once with the platform's error (its `retry_after` says when)."""
    max_response_body: int = 64 * MIB
    """Bytes of one REST answer the agent reads (a page of 100 messages); past it the call
    fails with `PlatformProtocolError` and its connection is dropped."""
    rest_backstop: float = 5.0
    """httpx2's own timeout is `request_deadline` plus this: a backstop behind trio's
    deadline, which is the one that governs."""
    max_rooms: int = 100_000
    """The most rooms the agent serves (the room list is read up to this many, 100 a
    page; past it a warning names how many were left out). band-sdk stops at 5,000."""
    rest_connections: int = 32
    """HTTP connections the REST client keeps at most, every one of them kept alive:
    a burst (every room's first `/next` at start-up) waits for one of them instead
    of opening and closing connections, which overflowed a listener's backlog."""
    scan_pages: int = 1000
    """A walk through the room's unprocessed list (past a head `/next` keeps serving)
    reads at most this many pages of 100, and stops at a repeated cursor."""
    history_messages: int = 100
    """`Turn.history()` keeps the room's newest this many messages (its own and those
    that mention it). The platform serves them oldest first, a page at a time..."""
    history_pages: int = 50
    """...so the history reads up to this many pages of 100 to reach the newest; a
    room with more is cut at that point, with a warning."""
    room_restart_base: float = 0.5
    """A room loop that crashed is restarted by its owner after this, doubling..."""
    room_restart_cap: float = 30.0
    """...up to this."""
    admin_request: float = 10.0
    """Deadline of one call of `band-trio ctl` to the embedded platform's admin API."""

    # -- websocket (docs/discussion/connection.md) ---------------------------
    connect_deadline: float = 10.0
    """Deadline of the websocket handshake."""
    close_deadline: float = 2.0
    """Deadline of the websocket close handshake."""
    join_deadline: float = 10.0
    """A join (or leave) with no reply by then fails. A room's join counts it from its
    write or from the connection's last join reply, whichever is later: a platform
    answers a burst of joins in order, and the ones behind wait their turn."""
    join_window: int = 2048
    """Rooms joining at once on one connection (each its two topics, one after the
    other); the rest wait for a place. An agent in 10,000 rooms sent every join at
    once, and a platform that queues its replies by count (the embedded one's 4,096,
    before it pushed back) cut the socket off: the window keeps what it holds for the
    agent below this, however many rooms. Not smaller: a narrow window lets the first
    rooms' `/next` crowd out the later rooms' joins (256: 10,000 rooms joined in 30 s
    against 8.5 s; docs/benchmarks.md, "The join window")."""
    join_refusals: int = 5
    """A room whose join is refused more times than this on one connection is given
    up: it leaves the agent (with a log line) until the room list says otherwise."""
    join_retry_base: float = 1.0
    """A room's refused or unanswered join is retried, on the same connection, after
    this, doubling..."""
    join_retry_cap: float = 30.0
    """...up to this."""
    heartbeat_interval: float = 30.0
    """A heartbeat is sent this often, the first one this long after connect."""
    heartbeat_dead_after: float = 60.0
    """No heartbeat reply for this long closes the socket (code 4000)."""
    reconnect_base: float = 0.5
    """Reconnect backoff is `reconnect_base * 2**n` with equal jitter..."""
    reconnect_cap: float = 30.0
    """...capped here."""
    reconnect_stable: float = 60.0
    """A connection that stayed up this long resets the backoff."""
    max_message_size: int = 16 * MIB
    """Bytes of one websocket message the agent accepts (the platform pushes up to
    16 MiB; trio-websocket's own default, 1 MiB, would close the socket with 1009)."""

    # -- the process ------------------------------------------------------------
    collector_threshold: int = 50_000
    """`band-trio agent` only: the garbage collector's first threshold (Python's is
    700), with what is alive once the adapter is loaded frozen out of its sight. At a
    thousand busy rooms the default ran some 80 collections in the wave of one
    agent-wide interrupt (50-140 ms of the agent's CPU, ahead of the marks) and 130-240
    ms of them in a busy SIGTERM → exit. A program that runs `Agent` itself keeps its
    own collector settings."""

    # -- upstreams (the adapters' peers) --------------------------------------
    upstream: UpstreamPolicy = dataclasses.field(default_factory=UpstreamPolicy)
    """Retries, timeouts and read limits of every client of an upstream: the default of
    the reference adapters (each may be given its own) and of `call_upstream`; an
    adapter reads it as `Turn.upstream`."""

    def replace(self, **changes: Any) -> Policy:
        """A copy with some fields changed (`Policy().replace(max_attempts=3)`)."""
        return dataclasses.replace(self, **changes)

    def __post_init__(self) -> None:
        _check_numbers(self)
        if not isinstance(self.upstream, UpstreamPolicy):
            raise ValueError(f"Policy.upstream must be an UpstreamPolicy, got {self.upstream!r}")
        for name in (
            "max_attempts",
            "max_message_size",
            "rest_connections",
            "max_rooms",
            "max_response_body",
            "history_messages",
            "history_pages",
            "scan_pages",
            "adapter_threads",
            "room_inbox",
            "join_window",
            "collector_threshold",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"Policy.{name} must be >= 1")
        if self.collector_threshold > COLLECTOR_THRESHOLD_MAX:
            raise ValueError(
                f"Policy.collector_threshold must be at most {COLLECTOR_THRESHOLD_MAX}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerPolicy:
    """How band-trio's HTTP servers bound what they send (`band_trio.server`).

    hypercorn shields every write to a socket: a client that stops reading would
    hold its connection, the response's buffer and the server's shutdown for as long
    as it likes. So each write is cut into `send_chunk` pieces, each with a deadline."""

    send_stall: float = 10.0
    """A client that takes no part of a `send_chunk` for this long is dropped (its
    connection closed): an unread stream costs at most this long and one chunk."""
    closing_stall: float = 0.25
    """Once the server is closing, a write that does not go through within this
    long is cut off (a stalled client never holds a shutdown)."""
    send_chunk: int = 64 * 1024
    """Bytes written to a socket at a time, each piece under the stall deadline; also
    what one streamed body piece holds, so a stalled stream holds at most this."""
    body_read: float = 30.0
    """A request's body must have arrived this long after the request began: a
    client that trickles it (or stops) is answered 408 and its connection closed."""
    keep_alive: float = 5.0
    """A connection with no request in progress is closed this long after its last
    answer ended (hypercorn's `keep_alive_timeout`, its default)."""

    def __post_init__(self) -> None:
        _check_numbers(self)
        if self.send_chunk < 1:
            raise ValueError("ServerPolicy.send_chunk must be >= 1")
        for name in ("send_stall", "closing_stall", "body_read", "keep_alive"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ServerPolicy.{name} must be > 0")


COLLECTOR_THRESHOLD_MAX = 2**31 - 1
"""The largest first threshold the garbage collector takes (`gc.set_threshold` reads a
C int): a larger `collector_threshold` is refused when the policy is built."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlatformPolicy:
    """Durations (seconds) and counts of the embedded platform (the server side)."""

    close_grace: float = 1.0
    """After sending a close frame, how long a socket waits for the client's close."""
    supersede_close_delay: float = 1.0
    """A superseded socket gets this long to read its `supersede` before it is closed."""
    sockets_close_grace: float = 2.0
    """Shutdown waits this long for the websockets to finish their close handshake..."""
    request_grace: float = 1.0
    """...then gives in-flight HTTP requests this long (hypercorn's `graceful_timeout`)..."""
    shutdown_deadline: float = 5.0
    """...and everything left is cancelled this long after the shutdown began."""
    listen_backlog: int = 1024
    """The listening socket's backlog (hypercorn's default, 100, dropped SYNs — a
    second's retransmission each — when thousands of rooms' requests arrived at once;
    the kernel caps it at `net.core.somaxconn`)."""
    outbound_queue: int = 4096
    """Frames a websocket may have waiting to be sent before the platform stops reading
    from it: the replies to its own frames wait for room (backpressure), so a client
    that pipelines more than this, and reads, gets every reply (`band-trio platform
    --outbound-queue N`)..."""
    outbound_overflow: int = 4096
    """...while pushes (what others' activity fans out) never wait: they are queued past
    `outbound_queue`, up to this many more. One more means the client fell that far
    behind, and it is aborted (1011; the agent resyncs through `/next`)."""
    outbound_stall: float = 10.0
    """A websocket whose queue is full and to which nothing was sent for this long has
    stopped reading: it is aborted (1011). The time, not how much it asked for, decides."""
    max_request_body: int = 8 * 1024 * 1024
    """Bytes of an HTTP request body (REST and admin) the platform reads; a longer
    one is answered 413 with the error envelope, unread."""
    max_ws_message: int = 16 * 1024 * 1024
    """Bytes of one websocket message either way (the server seam's cap on what it reads,
    counted as the message arrives, permessage-deflate never negotiated: one past it
    is closed with 1009, the rest unread; what the platform pushes stays under it: a
    post is at most `max_request_body`)."""
    log_entries: int = 20_000
    """The request log keeps this many entries, the newest (a ring)..."""
    log_text_limit: int = 1024
    """...and cuts each logged body, frame, path or query string to this many characters."""
    collector_threshold: int = 50_000
    """`band-trio platform` only: the garbage collector's first threshold (Python's is
    700), with what is alive as it starts frozen out of its sight: serving a
    thousand agents, the default ran a full collection of the whole heap every few
    seconds. A program that runs the platform itself keeps its own settings."""

    # -- the browser console (`band-trio platform --console`) --------------------
    console_push_interval: float = 0.05
    """A console stream sends at most one state this often: changes in between (a
    busy platform changes many times a millisecond) are coalesced into the next."""
    console_keepalive: float = 15.0
    """An idle console stream sends a comment this often, so a dead page is noticed."""
    console_reconnect: float = 1.0
    """How soon a page whose stream broke (a platform restart) tries again."""
    console_messages: int = 200
    """The newest messages of the selected room a console shows, each cut to..."""
    console_message_chars: int = 20_000
    """...this many characters (the rest is counted: a state stays small however
    long the posts are)..."""
    console_rooms: int = 500
    """...and the rooms and agents it lists (the rest are counted)."""
    console_presses: int = 20
    """The interrupt/stop/play presses a console remembers, with their latencies..."""
    console_press_window: float = 30.0
    """...each watched this long in the request log for its effects."""
    console_streams: int = 32
    """Console streams open at once (pages, tabs); one more is answered 503 with a
    message the page shows. Each costs one socket and at most one `send_chunk`."""
    server: ServerPolicy = dataclasses.field(default_factory=ServerPolicy)
    """How the platform's server bounds what it sends (shared with the other servers)."""

    def replace(self, **changes: float | int) -> PlatformPolicy:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        _check_numbers(self)
        for name in (
            "outbound_queue",
            "max_request_body",
            "max_ws_message",
            "log_entries",
            "listen_backlog",
            "console_messages",
            "console_message_chars",
            "console_rooms",
            "console_presses",
            "console_streams",
            "collector_threshold",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"PlatformPolicy.{name} must be >= 1")
        if self.collector_threshold > COLLECTOR_THRESHOLD_MAX:
            raise ValueError(
                f"PlatformPolicy.collector_threshold must be at most {COLLECTOR_THRESHOLD_MAX}"
            )
        if not self.outbound_stall > 0:
            raise ValueError("PlatformPolicy.outbound_stall must be > 0")
        if not isinstance(self.server, ServerPolicy):
            raise ValueError(f"PlatformPolicy.server must be a ServerPolicy, got {self.server!r}")


def _check_numbers(policy: Policy | PlatformPolicy | UpstreamPolicy | ServerPolicy) -> None:
    for field in dataclasses.fields(policy):
        value = getattr(policy, field.name)
        if isinstance(value, UpstreamPolicy | ServerPolicy):
            continue  # checked by its own __post_init__
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            name = type(policy).__name__
            raise ValueError(f"{name}.{field.name} must be a number >= 0, got {value!r}")


class WhileBusy(enum.Enum):
    """What a room does with a message that arrives while one of its turns runs."""

    ENQUEUE = "enqueue"
    """It waits its turn, in platform order (band-sdk's behaviour)."""
    BUSY = "busy"
    """The agent answers at once that it is working and how to stop it; the message
    stays queued and runs in its turn."""
    INTERRUPT = "interrupt"
    """The new message aborts the running turn as an interrupt (its message consumed,
    its remote work stopped), then runs. A burst interrupts once and runs in order."""
    STEER = "steer"
    """The message is offered to the running turn as guidance (`Turn.take_guidance`);
    one the turn takes is its own from then on, one it does not take runs afterwards,
    in order. A turn that never takes guidance behaves as under `ENQUEUE`."""


BUSY_NOTICE = (
    "I'm still working on an earlier message and will answer this one next. "
    "To stop me, press stop (or interrupt, to drop what I'm doing)."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class BusyPolicy:
    """`WhileBusy` for an agent, with per-room overrides (`Agent(while_busy=...)`)."""

    default: WhileBusy = WhileBusy.ENQUEUE
    rooms: Mapping[str, WhileBusy] = dataclasses.field(default_factory=dict)
    """Room id → the strategy for that room, overriding `default`."""
    notice: str = BUSY_NOTICE
    """What the `busy` strategy answers (mentioning the sender)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "default", _strategy(self.default, "default"))
        rooms = {room: _strategy(value, f"rooms[{room!r}]") for room, value in self.rooms.items()}
        object.__setattr__(self, "rooms", types.MappingProxyType(rooms))
        if not self.notice.strip():
            raise ValueError("BusyPolicy.notice must not be blank")

    def for_room(self, room_id: str) -> WhileBusy:
        return self.rooms.get(room_id, self.default)


def _strategy(value: WhileBusy | str, name: str) -> WhileBusy:
    try:
        return WhileBusy(value)
    except ValueError:
        choices = ", ".join(s.value for s in WhileBusy)
        raise ValueError(f"BusyPolicy.{name} must be one of {choices}; got {value!r}") from None
