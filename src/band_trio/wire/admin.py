"""Bodies of the embedded platform's admin API (not part of the Band protocol).

Shared by the platform (server side) and by the CLI, tests and benchmarks that
drive it, so both sides agree on one schema.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "AdminAgent",
    "AdminControl",
    "AdminDelivery",
    "AdminLogEntry",
    "AdminMessage",
    "AdminNewMessage",
    "AdminParticipant",
    "AdminRoom",
    "AdminUser",
    "ControlAccepted",
    "Created",
    "FaultClose",
    "FaultDrop",
    "FaultHeartbeats",
    "FaultHold",
    "FaultHoldState",
    "FaultJoins",
    "FaultProcessed",
    "FaultRelease",
    "FaultRest",
    "FaultResult",
    "FaultSupersede",
    "FaultUpgrades",
    "ReadyInfo",
]


class _Admin(
    msgspec.Struct, kw_only=True, omit_defaults=True, gc=False, forbid_unknown_fields=True
):
    """Unknown fields are refused (422): a body meant for something else — a bridge
    target pointed here by mistake, a misspelt field — is not taken as a request with
    every optional field left out (`POST /agents` would create an agent)."""


class ReadyInfo(_Admin):
    """What `band-trio platform --ready-file F` writes once it is listening."""

    rest_url: str
    ws_url: str
    admin_url: str
    agent_id: str | None = None
    api_key: str | None = None
    room_id: str | None = None
    user_id: str | None = None
    pid: int | None = None
    console_url: str | None = None
    """The browser console's page, when the platform serves one (`--console`)."""


class Created(_Admin):
    id: str


class AdminAgent(_Admin):
    """`POST /agents` request (all optional) and response (id and key filled)."""

    id: str | None = None
    name: str | None = None
    handle: str | None = None
    description: str | None = None
    api_key: str | None = None


class AdminUser(_Admin):
    """`POST /users` request (all optional) and response (id filled)."""

    id: str | None = None
    name: str | None = None
    handle: str | None = None


class AdminRoom(_Admin):
    """`POST /rooms` request and response."""

    id: str | None = None
    title: str | None = None
    participants: list[str] = msgspec.field(default_factory=list)


class AdminParticipant(_Admin):
    """`POST /rooms/{room_id}/participants` request."""

    id: str


class AdminNewMessage(_Admin):
    """`POST /rooms/{room_id}/messages` request. No `mentions`: every agent receives it."""

    sender_id: str
    content: str
    mentions: list[str] | None = None


class AdminMessage(_Admin):
    """One message of `GET /rooms/{room_id}/messages`."""

    id: str
    sender_id: str
    sender_type: str
    content: str
    message_type: str
    inserted_at: str | None = None


class AdminDelivery(_Admin):
    """`GET /messages/{id}`: per-recipient delivery status and attempt count."""

    id: str
    room_id: str
    delivery: dict[str, dict[str, Any]]


class AdminControl(_Admin):
    """`POST /control` request."""

    agent_id: str
    mode: Literal["interrupt", "stop", "play"]
    room_id: str | None = None
    scope: Literal["agent", "room"] | None = None
    reason: str | None = None


class ControlAccepted(_Admin):
    correlation_id: str
    connected: bool | None = None
    """Whether the agent had a live socket to push the signal to (None from a platform
    that does not say). A stop or play changes the gate either way; an interrupt sent
    to no socket reaches no one."""


class AdminLogEntry(_Admin):
    """One line of `GET /log?since=N`: a REST request or a websocket frame."""

    seq: int
    t: float
    kind: Literal["rest", "ws_in", "ws_out", "ws_open", "ws_close", "note"]
    agent_id: str | None = None
    method: str | None = None
    path: str | None = None
    query: str | None = None
    """The request's query string as sent (percent-encoded), when it had one."""
    status: int | None = None
    body: str | None = None
    frame: str | None = None


# -- fault injection (`POST /_admin/faults/...`) ------------------------------


class FaultRest(_Admin):
    """`POST /faults/rest`: fail (`status`), delay (`delay`, seconds) or drop (`drop`:
    handle, then cut the connection unanswered) the next `count` calls of a REST route.
    Exactly one of `status`, `delay` and `drop`. `body` replaces the error envelope
    (sent as UTF-8); the filters narrow the match."""

    route: str
    status: int | None = None
    delay: float | None = None
    drop: bool = False
    count: int = 1
    body: str | None = None
    retry_after: float | None = None
    room_id: str | None = None
    message_id: str | None = None
    agent_id: str | None = None


class FaultDrop(_Admin):
    """`POST /faults/drop`: cut the agent's socket's TCP connection, no close frame."""

    agent_id: str


class FaultClose(_Admin):
    """`POST /faults/close`: close the agent's socket with `code`."""

    agent_id: str
    code: int
    reason: str = ""


class FaultUpgrades(_Admin):
    """`POST /faults/upgrades`: refuse the next `count` websocket upgrades."""

    count: int
    status: int
    body: str | None = None
    retry_after: float | None = None


class FaultHeartbeats(_Admin):
    """`POST /faults/heartbeats`: mute (or unmute) heartbeat replies; no agent: all."""

    agent_id: str | None = None
    muted: bool = True


class FaultSupersede(_Admin):
    """`POST /faults/supersede`: push `supersede` to the agent, close its socket after 1 s."""

    agent_id: str
    retryable: bool = False
    reason: str = "superseded"
    message: str = "Superseded by the platform (fault injection)"
    retry_after: int | None = None


class FaultJoins(_Admin):
    """`POST /faults/joins`: refuse every agent's `phx_join` of `topic` (the next
    `count` of them, or until cleared when `count` is null) with `reason`;
    `clear: true` lifts the refusal of `topic` (of every topic if `topic` is null)."""

    topic: str | None = None
    count: int | None = None
    reason: str = "fault injected: join refused"
    clear: bool = False


class FaultProcessed(_Admin):
    """`POST /faults/processed`: `processed` terminal (`keep_processed`) or not."""

    terminal: bool = True


class FaultHold(_Admin):
    """`POST /faults/hold`: hold the next `count` calls of a REST route open until
    `POST /faults/release` with the `hold_id` of the answer (or `/faults/clear`)."""

    route: str
    count: int = 1
    room_id: str | None = None
    message_id: str | None = None
    agent_id: str | None = None


class FaultRelease(_Admin):
    """`POST /faults/release`: let the requests of one hold proceed."""

    hold_id: str


class FaultHoldState(_Admin):
    """One hold in `GET /faults/holds`: how many requests it has held so far."""

    hold_id: str
    route: str
    held: int
    released: bool


class FaultResult(_Admin):
    """Answer of every `POST /faults/...`: `ok` is false when drop/close found no live
    socket (or release found no such hold); `correlation_id` is the supersede push's,
    `hold_id` the new hold's."""

    ok: bool
    correlation_id: str | None = None
    hold_id: str | None = None
