"""`HostApp`: the host's ASGI app, running a band-trio adapter for each forwarded message.

    POST /  (any path)      one bridge envelope, `Authorization: Bearer TOKEN`;
                            a `message_created` runs a turn on the platform's copy
                            of the message: claim (`/processing`) → adapter →
                            settle, as the runtime does; the answer, once the
                            turn settled, says what happened (`HostOutcome`);
                            a `message_interrupted` consumes the message whose
                            forward an interrupt cut off
    GET /health             200 while serving; with the token: turns started,
                            running, the answers by outcome, remote stops,
                            worker threads (abandoned ones counted)

Anyone who can reach the host could otherwise run turns as its agent, so each
request is checked before its body is read: the token (`--token-file` /
`BAND_HOST_TOKEN`), compared in constant time, or 401 with an error that names
nothing (no agent id). The server seam adds the browser defences (Host
allow-list, same-origin only, JSON bodies, no framing). Then the envelope is
only a pointer: the adapter runs on the message as the platform returns it
(`_turns`), and a turn that did not run is never answered 2xx.

The forward's HTTP request stays open for the whole turn, and it is the turn's
lifeline: when the request goes away (the bridge cancelled the forward on an
interrupt or stop, or the bridge is gone) the turn is aborted as a stop —
the adapter sees the cancel, its remote work is stopped, and the message is
left `processing`, so a play (the bridge's `/next` catch-up) replays it. The
request going away cannot say whether it was an interrupt or a stop; for an
interrupt the bridge then posts a `message_interrupted` envelope (`{"id": ...}`),
and the host consumes the message itself (`processed`), after its own claim
(`HostRooms.interrupted`). The host settles what it runs, so its bridge target
says `settle = "target"`.

Turns of one room run one at a time, in the runtime's room (a replay waits until
the aborted turn it replaces has settled: `_turns`); different rooms run
concurrently. The host never runs the adapter twice for a message the ledger has
completed.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
from collections import Counter

import msgspec
import trio

from ..bridge import INTERRUPTED, BridgePolicy, decode_envelope
from ..contract import Adapter
from ..link import RestClient
from ..observe import hooks as observe
from ..policy import BusyPolicy, Policy
from ..runtime.parts import ActiveTurn, Changes, Journal, RemoteStopLog, RoomContext
from ..server import (
    BodyTooLarge,
    ClientGone,
    Receive,
    Scope,
    Send,
    answer,
    read_body,
)
from ..wire import MessageCreated
from ._outcome import HostOutcome
from ._turns import HOST_RULES, HostRooms, Lifeline

__all__ = ["HostApp"]

log = logging.getLogger("band_trio.host")

_UNAUTHORIZED = msgspec.json.encode(
    {"error": {"code": "unauthorized", "message": "missing or wrong bearer token"}}
)


def _error(code: str, message: str) -> bytes:
    return msgspec.json.encode({"error": {"code": code, "message": message}})


class HostApp:
    """The ASGI app of `band-trio host`; `bind(rest)` it before serving.

    `token`: the bearer token every forward must carry; None serves anyone who can
    reach the host (`--insecure-no-token`, loopback only)."""

    def __init__(
        self,
        adapter: Adapter,
        *,
        agent_id: str,
        token: str | None,
        policy: Policy | None = None,
        bridge_policy: BridgePolicy | None = None,
    ) -> None:
        self.adapter = adapter
        self.agent_id = agent_id
        self._token = None if token is None else token.encode()
        self.policy = policy or Policy()
        self.bridge_policy = bridge_policy or BridgePolicy()
        self.changes = Changes()
        self.stops = RemoteStopLog()
        self.journal = Journal()
        self.rooms = HostRooms(self.policy, self.bridge_policy)
        self.outcomes: Counter[str] = Counter()
        """The forwards answered, by outcome (`HostOutcome.label`)."""
        self.refused = 0
        """Requests refused for a missing or wrong token."""

    @property
    def turns(self) -> int:
        """Turns started (the adapter called or about to be)."""
        return self.rooms.turns

    def bind(self, rest: RestClient) -> None:
        """Use `rest` (the identity's REST client) for claims, marks and posts."""
        context = RoomContext(
            agent_id=self.agent_id,
            rest=rest,
            adapter=self.adapter,
            policy=self.policy,
            busy=BusyPolicy(),
            changes=self.changes,
            journal=self.journal,
            stops=self.stops,
            threads=self.rooms.threads,
            cutoff=self.rooms.cutoff,
            rules=HOST_RULES,
        )
        self.rooms.bind(context)

    def running(self, room_id: str) -> ActiveTurn | None:
        return self.rooms.running(room_id)

    def sample(self) -> observe.Sample:
        """What `/metrics` shows of the host now: its turns running, its rooms."""
        rooms = self.rooms
        return observe.Sample("turn", in_progress=rooms.running_count, rooms=len(rooms))

    def running_turns(self) -> list[tuple[str, str]]:
        """(room, message) of every turn running now."""
        return self.rooms.running_turns()

    def hard_stop(self, reason: str = "stopped at once") -> None:
        """Stop now (a second signal): every open turn is aborted, its message left
        `processing`, and every shielded wait of the turns ends within
        `Policy.hard_stop_grace`."""
        self.rooms.hard_stop(reason)

    def _authorized(self, scope: Scope) -> bool:
        """Exactly one `Authorization: Bearer TOKEN`, compared in constant time."""
        if self._token is None:
            return True
        given = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(given) != 1:
            return False
        kind, _, token = given[0].partition(b" ")
        return kind.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        authorized = self._authorized(scope)
        if scope["method"] == "GET" and scope["path"] == "/health":
            await answer(send, 200, self._health(authorized))
            return
        if not authorized:  # before any of the body is read
            self.refused += 1
            await answer(
                send,
                401,
                _UNAUTHORIZED,
                ((b"www-authenticate", b"Bearer"), (b"connection", b"close")),
            )
            return
        if scope["method"] != "POST":
            await answer(send, 405, _error("method_not_allowed", "POST a bridge envelope"))
            return
        try:
            body = await read_body(scope, receive, self.bridge_policy.host_max_body)
        except BodyTooLarge as exc:
            message = f"an envelope is at most {exc.limit} bytes"
            await answer(
                send, 413, _error("payload_too_large", message), ((b"connection", b"close"),)
            )
            return
        except ClientGone:
            return
        status, reply = await self._envelope(body, receive)
        if status:
            await answer(send, status, reply)

    def _health(self, authorized: bool) -> bytes:
        if not authorized:
            return b'{"ok":true}'
        stops = self.stops.stats
        return msgspec.json.encode(
            {
                "ok": True,
                "turns": self.turns,
                "running": self.rooms.running_count,
                "rooms": len(self.rooms),
                "outcomes": dict(self.outcomes),
                "remote_stops": {
                    "confirmed": stops.confirmed,
                    "requested": stops.requested,
                    "unconfirmed": stops.unconfirmed,
                },
                "threads": dataclasses.asdict(self.rooms.threads.stats),
            }
        )

    async def _envelope(self, body: bytes, receive: Receive) -> tuple[int, bytes]:
        """(status, body) to answer, or (0, b"") when the request has gone away."""
        try:
            envelope = decode_envelope(body)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return 422, _error("invalid_envelope", f"not a bridge envelope: {exc}")
        except RecursionError:  # msgspec decodes an Any payload recursively
            return 422, _error("invalid_envelope", "not a bridge envelope: nested too deeply")
        if envelope.agent_id != self.agent_id:
            return 422, _error("wrong_agent", "this host runs another agent")
        if envelope.event_type == INTERRUPTED and envelope.room_id is not None:
            message_id = envelope.payload.get("id")
            reason = envelope.payload.get("reason")
            if not isinstance(message_id, str) or not (reason is None or isinstance(reason, str)):
                return 422, _error("invalid_envelope", "an interrupt names its message's id")
            return self._answer(await self.rooms.interrupted(envelope.room_id, message_id, reason))
        if envelope.event_type != "message_created" or envelope.room_id is None:
            return self._answer(HostOutcome.IGNORED)
        try:
            wire = msgspec.convert(envelope.payload, MessageCreated)
        except msgspec.ValidationError as exc:
            return 422, _error("invalid_envelope", f"not a message: {exc}")
        outcome = await self._turn(envelope.room_id, wire, receive)
        if outcome is None:
            return 0, b""
        return self._answer(outcome)

    def _answer(self, outcome: HostOutcome) -> tuple[int, bytes]:
        self.outcomes[outcome.label] += 1
        self.changes.notify()
        return outcome.status, msgspec.json.encode({"outcome": outcome.label})

    async def _turn(
        self, room_id: str, wire: MessageCreated, receive: Receive
    ) -> HostOutcome | None:
        lifeline = Lifeline()
        outcome = None
        listening = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            # the lifeline: the request going away aborts the turn, in any phase
            nursery.start_soon(_listen, receive, lifeline, listening)
            with lifeline.scope:
                outcome = await self.rooms.turn(room_id, wire, lifeline)
            listening.cancel(reason="the turn is over")
        return None if lifeline.gone else outcome


async def _listen(receive: Receive, lifeline: Lifeline, listening: trio.CancelScope) -> None:
    """The request's lifeline (ended by `listening` once the turn is over). A cancel of
    the request from outside (the server closing past its grace, a hard stop) reaches
    this task with the turn's: `Lifeline.cancelled` records the abort first."""
    try:
        with listening:
            while (await receive())["type"] != "http.disconnect":
                pass
            lifeline.went_away()
    except BaseException:
        lifeline.cancelled()
        raise
