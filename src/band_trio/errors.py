"""The exception tree of band-trio. Everything raised on purpose derives from it.

    BandTrioError
    ├── ConfigurationError          bad arguments, missing URL or key
    ├── AdapterError                an adapter's start-up hook raised or overran
    │   ├── AsyncioCancelledError       asyncio code was cancelled, but not by its turn
    │   ├── NoTurnError                 `run_asyncio` called outside a turn
    │   └── CannotAskError              the turn's port has nobody to ask (`Turn.ask`)
    ├── UpstreamError               an upstream (LLM, A2A agent, target) failed the call, for good
    │   └── PeerProtocolError           it answered something we cannot read
    ├── PlatformError               talking to the platform failed (REST or websocket)
    │   ├── PlatformUnavailableError    the transport failed: refused, reset, no answer in time
    │   │   └── ConnectionClosedError       the websocket closed under an operation
    │   ├── PlatformProtocolError       the platform answered something we cannot read
    │   ├── PlatformResponseError       the platform answered with an error status
    │   │   ├── AuthenticationError         wrong or missing key, or another agent's (terminal)
    │   │   ├── ExecutionStoppedError       403 `forbidden` on a post: the room is stopped
    │   │   ├── NotFoundError               404 / `not_found`
    │   │   ├── ConflictError               409 / `connection_conflict`
    │   │   └── RateLimitedError            429 that outlived our retries
    │   └── JoinError                   the platform refused or ignored a channel join
    ├── AgentDisconnectedError      the platform ended the agent's session for good
    ├── ForwardError                a bridge's target did not take a forward (status, exit, I/O)
    └── StartCutError               a remote start was cut by its deadline before its handle

Every failure of the link is a `PlatformError`, so a caller that means "the
platform did not do it" catches one class. Lower layers (httpx2,
trio-websocket, msgspec) are translated into this tree at one seam per
transport (`link._rest.RestClient._call` with `map_transport_errors`, and the
socket's connect in `link._socket.run_socket`), with the original exception
chained as `__cause__`. Error envelopes are told apart by their `code`
(`link._status`), never by their message text."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AdapterError",
    "AgentDisconnectedError",
    "AsyncioCancelledError",
    "AuthenticationError",
    "BandTrioError",
    "CannotAskError",
    "ConfigurationError",
    "ConflictError",
    "ConnectionClosedError",
    "DisconnectReason",
    "ExecutionStoppedError",
    "ForwardError",
    "JoinError",
    "NoTurnError",
    "NotFoundError",
    "PeerProtocolError",
    "PlatformError",
    "PlatformProtocolError",
    "PlatformResponseError",
    "PlatformUnavailableError",
    "RateLimitedError",
    "StartCutError",
    "UpstreamError",
]


class BandTrioError(Exception):
    """Base class of every error band-trio raises on purpose."""


class ConfigurationError(BandTrioError):
    """An agent or platform was set up with missing or invalid settings."""


class AdapterError(BandTrioError):
    """The adapter failed a hook the agent cannot run without (`on_started`), or
    ran past its deadline."""


class AsyncioCancelledError(AdapterError):
    """asyncio code run by `contract.run_asyncio` ended cancelled although its turn
    was not aborted: a framework cancelled its own task, or a `CancelledError` escaped
    an inner timeout. It is the turn's failure, never taken for its abort."""


class NoTurnError(AdapterError):
    """`contract.run_asyncio` (or `contract.current_turn`) was called outside a turn:
    not from an adapter's `on_turn`, nor from a task it started."""


class CannotAskError(AdapterError):
    """`Turn.ask` on a turn whose port has nobody to ask: a turn built by hand with a
    port that serves no questions (a runs API run asks its client: an approval)."""


class UpstreamError(BandTrioError):
    """An adapter's upstream (a model provider, an A2A agent, OpenCode) failed the call
    for good: a status that is the answer (400, 401, 404, …), or transient faults that
    outlived the retries `UpstreamPolicy` allows (`contract.call_upstream`).

    Its message says why in words a room's users can read ("the model provider
    answered 429 three times; last Retry-After 1 s"): a turn that fails with one posts
    them in its error event. The reference adapters' errors derive from it."""


class PeerProtocolError(UpstreamError):
    """An adapter's peer (an LLM server, an A2A agent) sent something unusable: an
    event too large to hold, a body over its limit, a frame that is not what its
    protocol says. Never retried."""


class PlatformError(BandTrioError):
    """A call to the platform did not succeed."""


class PlatformUnavailableError(PlatformError):
    """The platform could not be reached, or did not answer within the deadline.

    `maybe_handled` tells the two apart for a request that changes something (a post):
    False when the request never left (no connection could be made), True when it was
    sent and no answer came (the connection broke, the deadline passed) — the platform
    may have stored it, and only a look at the room can say (docs/discussion/closing.md,
    "A reply whose post broke")."""

    def __init__(self, message: str, *, maybe_handled: bool = True) -> None:
        super().__init__(message)
        self.maybe_handled = maybe_handled


class PlatformProtocolError(PlatformError):
    """The platform answered with a body or status that breaks the wire contract."""


class PlatformResponseError(PlatformError):
    """The platform answered with an HTTP error status and (usually) an error envelope."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code or 'error'}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retry_after = retry_after


class AuthenticationError(PlatformResponseError):
    """401: the API key is missing or wrong, or 403: it is another agent's. Retrying will
    not help (the commands exit 3, as for the socket's own refusal of the pair)."""


class ExecutionStoppedError(PlatformResponseError):
    """403 on a post to a room: the platform holds this room stopped for the agent.

    Raised for the envelope code `forbidden` on `POST .../messages` and
    `POST .../events`, where the platform's only refusal is its stopped gate
    (docs/reference/platform.md, "Stopped gate")."""


class NotFoundError(PlatformResponseError):
    """404: no such room, message or route."""


class ConflictError(PlatformResponseError):
    """409: the request conflicts with the platform's state (e.g. connection_conflict)."""


class RateLimitedError(PlatformResponseError):
    """429 that persisted through every retry the policy allows."""


class JoinError(PlatformError):
    """The platform refused a channel join, or gave no reply before the deadline."""

    def __init__(self, topic: str, reason: str, *, refused: bool = True) -> None:
        super().__init__(f"join of {topic!r} failed: {reason}")
        self.topic = topic
        self.reason = reason
        self.refused = refused
        """True if the platform said no; False if it did not answer in time."""


class ConnectionClosedError(PlatformUnavailableError):
    """The websocket closed while an operation (a join, a send) needed it."""


@dataclass(frozen=True, slots=True)
class DisconnectReason:
    """Why the platform ended a session for good (a terminal disconnect)."""

    reason: str
    """A code: the platform's (`superseded`, `connection_conflict`) or `http_<status>`."""
    message: str
    retryable: bool = False
    retry_after: float | None = None
    correlation_id: str | None = None


class AgentDisconnectedError(BandTrioError):
    """The platform ended the session for good; `Agent.run()` raises this."""

    def __init__(self, reason: DisconnectReason) -> None:
        super().__init__(f"disconnected for good: {reason.reason}: {reason.message}")
        self.reason = reason


class ForwardError(BandTrioError):
    """A bridge target did not take a forward: an HTTP status other than 2xx, the
    connection failing, a command exiting nonzero. The forward is not remembered as
    delivered, so the event is forwarded again when it is redelivered."""


class StartCutError(BandTrioError):
    """The call that starts a turn's remote work (`RemoteWork.starting()`) was cut by
    its deadline before it finished: the turn was aborted and the start got its
    `backend_stop_grace`, or the turn's own deadline passed. Whatever the call
    started, if anything, is unknown, and no handle may be used after it.

    `starting()` raises it as its block ends, so code after the block never runs
    on a start that did not finish. The runtime counts it as part of the abort
    (the turn's message is consumed or left by the abort's kind), not as the
    adapter failing."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"the start of {name} was cut off: {detail}")
        self.name = name
        self.detail = detail
