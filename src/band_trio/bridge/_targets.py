"""Where a forward goes: an HTTP endpoint, an A2A agent, or a command.

Every target is called inside the forward's cancel scope with a contract
`Turn` that carries the forward's remote-stop bookkeeping, so each one stops
the way its kind of work stops:

* HTTP — cancelling the request closes its connection; a server that watches
  for the client going away (the host does) sees it at once. The POST goes
  through `call_upstream`: a 408/409/429/5xx/529, no connection or a dropped
  one is asked again under `Policy.upstream` (Retry-After honoured, backoff
  with full jitter, the wait cancelled by an interrupt or stop). No read
  timeout: the host keeps the request open for its whole turn
  (`BridgePolicy.forward_deadline` bounds it). Only `target_max_body` bytes of
  the answer are read; past them the connection is dropped. Identities whose
  targets share an origin share one client (`TargetClients`, the bridge's).
* A2A — through `A2AAdapter`: a cancelled forward cancels the A2A task
  (`CancelTask`) under the remote-stop deadline, and the outcome is recorded;
  its requests are retried as the adapter's are.
* command — through `run_command`: the envelope on stdin, the whole process
  group ended on cancel (SIGTERM, SIGKILL after the kill grace).

A target raises `ForwardError` when it did not take the forward; nothing is
then remembered as delivered.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from http.cookiejar import CookieJar, DefaultCookiePolicy

import httpx2
import msgspec

from ..adapters import A2AAdapter
from ..contract import Turn, UpstreamFault, call_upstream, error_detail, read_body, run_command
from ..errors import ForwardError, PeerProtocolError
from ..retry import retry_after
from ..tls import shared_ssl_context
from ._config import A2ATargetConfig, CommandTargetConfig, HttpTargetConfig, TargetConfig
from ._envelope import Envelope
from ._policy import BridgePolicy

__all__ = [
    "A2ATarget",
    "CommandTarget",
    "HttpTarget",
    "Target",
    "TargetClients",
    "open_target",
]

log = logging.getLogger("band_trio.bridge.target")


class Target:
    """One identity's target. `forward` raises `ForwardError` if it was not taken;
    `room_left` is told when the identity left a room (after its last forward);
    `interrupted` is told when an interrupt cut off the forward of a message: True
    once the target consumed it, False if it was told but did not (the message is
    left, as a stop leaves it), None if it consumes nothing (the bridge marks it).
    The defaults are a target's that keeps nothing per room and consumes nothing."""

    async def forward(self, envelope: Envelope, turn: Turn) -> None:
        raise NotImplementedError

    async def room_left(self, room_id: str) -> None:
        """Nothing is kept per room."""

    async def interrupted(self, envelope: Envelope) -> bool | None:
        """Nothing is consumed on the platform: the bridge marks the message."""
        return None


class HttpTarget(Target):
    """POST the envelope as JSON (with the target's token, if it has one, as a bearer
    token: what `band-trio host` checks); any 2xx answer is a delivered forward."""

    def __init__(
        self, config: HttpTargetConfig, client: httpx2.AsyncClient, *, max_body: int
    ) -> None:
        self._url = config.url
        self._settles = config.settle == "target"
        self._headers = {**config.headers, "content-type": "application/json"}
        if config.token is not None:
            self._headers["authorization"] = f"Bearer {config.token}"
        self._client = client
        self._max_body = max_body
        self._hinted = False

    async def forward(self, envelope: Envelope, turn: Turn) -> None:
        content = envelope.encode()

        async def attempt() -> None:
            async with self._client.stream(
                "POST", self._url, content=content, headers=self._headers
            ) as response:
                try:
                    body = await read_body(response, self._max_body, what="the target's answer")
                except PeerProtocolError as exc:
                    if 200 <= response.status_code < 300:  # taken: the body is not needed
                        log.info("POST %s: %s; the connection is dropped", self._url, exc)
                        return
                    body = str(exc).encode()
                if not 200 <= response.status_code < 300:
                    raise UpstreamFault.status(
                        response.status_code,
                        retry_after=retry_after(response.headers),
                        detail=error_detail(body),
                    )
                self._hint(envelope, body)

        await call_upstream(turn, attempt, peer=f"the target {self._url}", error=ForwardError)

    def _hint(self, envelope: Envelope, body: bytes) -> None:
        """A `band-trio host` behind a target left at `settle = "bridge"` settles what
        it runs itself: harmless (the bridge's mark finds it settled), but every
        forward pays for a claim and a mark it does not need. Said once, at INFO."""
        if self._settles or self._hinted or not body.startswith(b"{"):
            return
        try:
            outcome = msgspec.json.decode(body, type=_Answer).outcome
        except msgspec.MsgspecError:
            return
        if outcome in _SETTLED_BY_HOST:
            self._hinted = True
            log.info(
                "identity %s: the target %s settled %s itself (a band-trio host); set "
                'settle = "target" for it (the bridge then neither claims nor marks its '
                "messages)",
                envelope.agent_id,
                self._url,
                envelope.message_id,
            )

    async def interrupted(self, envelope: Envelope) -> bool | None:
        """A target that settles what it runs (`settle = "target"`: a `band-trio host`)
        is told (`message_interrupted`) and consumes the message itself, after its own
        claim; one POST, no retry, bounded by the caller. A host that does not know the
        envelope answers `ignored`: None, the bridge marks it as before."""
        if not self._settles:
            return None
        try:
            async with self._client.stream(
                "POST", self._url, content=envelope.encode(), headers=self._headers
            ) as response:
                body = await read_body(response, self._max_body, what="the target's answer")
        except (httpx2.HTTPError, PeerProtocolError) as exc:
            log.warning("POST %s: the interrupt notice failed: %s", self._url, exc)
            return False
        try:
            outcome = msgspec.json.decode(body, type=_Answer).outcome
        except msgspec.MsgspecError:
            outcome = None
        if outcome == "ignored":
            return None
        if outcome in _CONSUMED:
            return True
        log.warning(
            "POST %s: the interrupt notice was answered %d %s: the message is left",
            self._url,
            response.status_code,
            outcome or "(no outcome)",
        )
        return False


class _Answer(msgspec.Struct):
    outcome: str | None = None


_SETTLED_BY_HOST = frozenset({"processed", "settled"})
"""A host's answers to a forward after which it marked the message itself."""

_CONSUMED = frozenset({"consumed", "completed", "unknown"})
"""A host's answers to an interrupt notice after which nothing is left to consume
(`unknown`: the platform holds it unprocessed no more)."""


class CommandTarget(Target):
    """Run the command with the envelope on stdin; exit 0 is a delivered forward."""

    def __init__(self, config: CommandTargetConfig) -> None:
        self._config = config

    async def forward(self, envelope: Envelope, turn: Turn) -> None:
        config = self._config
        try:
            result = await run_command(
                turn, config.argv, input=envelope.encode(), cwd=config.cwd, env=config.env
            )
        except OSError as exc:
            raise ForwardError(f"cannot run {config.argv[0]}: {exc.strerror or exc}") from exc
        if result.returncode != 0:
            tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
            why = f": {tail[0][:200]}" if tail else ""
            raise ForwardError(f"{config.argv[0]} exited {result.returncode}{why}")


class A2ATarget(Target):
    """Each forwarded message becomes an A2A task (the A2A adapter's turn); the
    agent's answer is posted to the room as the identity. Events that are not
    messages have no A2A counterpart and are taken without a call."""

    def __init__(self, config: A2ATargetConfig) -> None:
        self._adapter = A2AAdapter(config.url, streaming=config.streaming)

    async def forward(self, envelope: Envelope, turn: Turn) -> None:
        if envelope.event_type != "message_created":
            return
        try:
            await self._adapter.on_turn(turn)
        except (msgspec.ValidationError, ValueError) as exc:
            raise ForwardError(f"the A2A forward failed: {exc}") from exc
        except Exception as exc:  # the adapter's errors: a failed task, a bad peer
            raise ForwardError(f"the A2A forward failed: {type(exc).__name__}: {exc}") from exc

    async def room_left(self, room_id: str) -> None:
        await self._adapter.on_room_left(room_id)


class TargetClients:
    """The HTTP targets' clients: one per origin (scheme, host, port), shared by every
    identity that forwards there, owned by whoever made this (the bridge) and closed
    with its `stack`.

    A thousand identities in front of one host keep the host's connections to
    `target_connections`, not one or more per identity, and the bridge builds one
    client, not a thousand. Sharing costs no identity a wait: a pool holds
    `max(target_connections, max_forwards)` connections, and no more than
    `max_forwards` forwards are in flight over the whole bridge (its one limiter).
    Each forward sends its own target's headers and token, and a shared client keeps
    no cookies: what a target set in its answer to one identity is never sent with
    another's forward."""

    def __init__(self, policy: BridgePolicy, stack: AsyncExitStack) -> None:
        self._policy = policy
        self._stack = stack
        self._clients: dict[tuple[str, str, int | None], httpx2.AsyncClient] = {}

    def __len__(self) -> int:
        return len(self._clients)

    async def for_url(self, url: str) -> httpx2.AsyncClient:
        """The client for `url`'s origin, built (and entered into the stack) once."""
        parsed = httpx2.URL(url)
        origin = (parsed.scheme, parsed.host, parsed.port)
        client = self._clients.get(origin)
        if client is None:
            policy = self._policy
            connections = max(policy.target_connections, policy.max_forwards)
            client = httpx2.AsyncClient(
                timeout=httpx2.Timeout(None, connect=policy.forward_connect),
                limits=httpx2.Limits(
                    max_connections=connections, max_keepalive_connections=connections
                ),
                verify=shared_ssl_context(),  # one per process, not a CA bundle per client
                cookies=_no_cookies(),
            )
            self._clients[origin] = client  # before the await: a second asker shares it
            await self._stack.enter_async_context(client)
        return client


def _no_cookies() -> CookieJar:
    """A jar that takes no cookie from any domain."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


async def open_target(config: TargetConfig, policy: BridgePolicy, clients: TargetClients) -> Target:
    """The target for `config`; an HTTP target's client comes from `clients` (its
    owner closes it)."""
    if isinstance(config, HttpTargetConfig):
        client = await clients.for_url(config.url)
        return HttpTarget(config, client, max_body=policy.target_max_body)
    if isinstance(config, CommandTargetConfig):
        return CommandTarget(config)
    return A2ATarget(config)
