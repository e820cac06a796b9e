"""The host: the other end of a bridge, running a band-trio adapter for each message.

    POST /  (any path)      one bridge envelope; a `message_created` runs a turn:
                            claim (`/processing`) → adapter → settle, as the
                            runtime does, the answer sent once the turn settled
    GET /health             200 while serving: turns started, running, remote stops

The forward's HTTP request stays open for the whole turn, and it is the turn's
lifeline: when the request goes away (the bridge cancelled the forward on an
interrupt or stop, or the bridge is gone) the turn is aborted as a stop —
the adapter sees the cancel, its remote work is stopped, and the message is
left `processing`, so a play (the bridge's `/next` catch-up) replays it. The
host cannot tell an interrupt from a stop; the bridge can, and consumes an
interrupted message itself (`processed`, on the host's claim). The host settles
what it runs, so its bridge target says `settle = "target"`.

Turns of one room run one at a time (a replay waits until the aborted turn it
replaces has settled); different rooms run concurrently. The host never runs
the adapter twice for a message the ledger has completed.
"""

from __future__ import annotations

import logging

import msgspec
import trio

from ..contract import Adapter, LastAbort
from ..link import RestClient
from ..policy import BusyPolicy, Policy
from ..runtime.parts import (
    AbortKind,
    ActiveTurn,
    Changes,
    Journal,
    Ledger,
    Outcome,
    RemoteStopLog,
    RoomContext,
    Standing,
    inbound,
    run_turn,
    settle,
)
from ..wire import MessageCreated
from ._envelope import decode_envelope
from ._health import Receive, Scope, Send, answer, lifespan
from ._policy import BridgePolicy
from ._serve import serve_app

__all__ = ["HostApp", "serve_host"]

log = logging.getLogger("band_trio.bridge.host")


class _Room:
    """What the host keeps per room: the ledger, the serial lock, the last abort."""

    def __init__(self, policy: Policy) -> None:
        self.ledger = Ledger(max_attempts=policy.max_attempts, memory=policy.completed_memory)
        self.lock = trio.Lock()
        self.last_abort: LastAbort | None = None
        self.turn: ActiveTurn | None = None


class HostApp:
    """The ASGI app of `band-trio host`; `bind(rest)` it before serving."""

    def __init__(
        self,
        adapter: Adapter,
        *,
        agent_id: str,
        policy: Policy | None = None,
        bridge_policy: BridgePolicy | None = None,
    ) -> None:
        self.adapter = adapter
        self.agent_id = agent_id
        self.policy = policy or Policy()
        self.bridge_policy = bridge_policy or BridgePolicy()
        self.changes = Changes()
        self.stops = RemoteStopLog()
        self.journal = Journal()
        self._rooms: dict[str, _Room] = {}
        self._ctx: RoomContext | None = None
        self.turns = 0
        """Turns started (the adapter called or about to be)."""

    def bind(self, rest: RestClient) -> None:
        """Use `rest` (the identity's REST client) for claims, marks and posts."""
        self._ctx = RoomContext(
            agent_id=self.agent_id,
            rest=rest,
            adapter=self.adapter,
            policy=self.policy,
            busy=BusyPolicy(),
            changes=self.changes,
            journal=self.journal,
            stops=self.stops,
        )

    def running(self, room_id: str) -> ActiveTurn | None:
        room = self._rooms.get(room_id)
        return room.turn if room is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET" and scope["path"] == "/health":
            stops = self.stops.stats
            health = {
                "ok": True,
                "turns": self.turns,
                "running": sum(1 for room in self._rooms.values() if room.turn is not None),
                "remote_stops": {
                    "confirmed": stops.confirmed,
                    "requested": stops.requested,
                    "unconfirmed": stops.unconfirmed,
                },
            }
            await answer(send, 200, msgspec.json.encode(health))
            return
        if scope["method"] != "POST":
            await answer(send, 405, b'{"error":"POST a bridge envelope"}')
            return
        body = await _body(receive, self.bridge_policy.host_max_body)
        if body is None:
            await answer(send, 413, b'{"error":"envelope too large"}')
            return
        status, reply = await self._envelope(body, receive)
        if status:
            await answer(send, status, reply)

    async def _envelope(self, body: bytes, receive: Receive) -> tuple[int, bytes]:
        """(status, body) to answer, or (0, b"") when the request has gone away."""
        try:
            envelope = decode_envelope(body)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            return 422, msgspec.json.encode({"error": f"not a bridge envelope: {exc}"})
        except RecursionError:  # msgspec decodes an Any payload recursively
            return 422, msgspec.json.encode({"error": "not a bridge envelope: nested too deeply"})
        if envelope.agent_id != self.agent_id:
            return 409, msgspec.json.encode({"error": f"this host runs {self.agent_id}"})
        if envelope.event_type != "message_created" or envelope.room_id is None:
            return 200, msgspec.json.encode({"outcome": "ignored"})
        try:
            wire = msgspec.convert(envelope.payload, MessageCreated)
        except msgspec.ValidationError as exc:
            return 422, msgspec.json.encode({"error": f"not a message: {exc}"})
        outcome = await self._turn(envelope.room_id, wire, receive)
        if outcome is None:
            return 0, b""
        return 200, msgspec.json.encode({"outcome": outcome})

    async def _turn(self, room_id: str, wire: MessageCreated, receive: Receive) -> str | None:
        ctx = self._ctx
        assert ctx is not None, "HostApp.bind(rest) first"
        item = inbound(room_id, self.agent_id, wire)
        message = item.message
        if item.processed or message.sender_id == self.agent_id:
            return "skipped"
        room = self._rooms.get(room_id)
        if room is None:
            room = self._rooms[room_id] = _Room(self.policy)
        turn = ActiveTurn(message, self.policy)
        async with trio.open_nursery() as nursery:
            # the lifeline: the request going away aborts the turn, in any phase
            nursery.start_soon(_abort_when_gone, receive, turn)
            async with room.lock:
                standing = room.ledger.standing(message.id)
                if turn.abort_kind is not None:
                    outcome = "aborted"
                elif standing is Standing.ACK_PENDING:
                    turn.failure = room.ledger.pending_failure(message.id)
                    done = Outcome.SUCCEEDED if turn.failure is None else Outcome.FAILED
                    await settle(ctx.rest, ctx.policy, room.ledger, turn, done)
                    outcome = "settled"
                elif standing is not Standing.RUNNABLE:
                    outcome = standing.value
                else:
                    outcome = await self._run(ctx, room, turn)
            nursery.cancel_scope.cancel(reason="the turn is over")
        return None if turn.abort_kind is not None else outcome

    async def _run(self, ctx: RoomContext, room: _Room, turn: ActiveTurn) -> str:
        room.turn = turn
        self.turns += 1
        self.changes.notify()
        try:
            await run_turn(ctx, room.ledger, turn, room.last_abort)
        finally:
            room.turn = None
            if turn.abort_kind is not None:
                room.last_abort = turn.abort_kind.note(turn.abort_reason, turn.message.id)
            self.changes.notify()
        if turn.abort_kind is not None:
            return "aborted"
        return "failed" if turn.failure is not None else "processed"


async def _abort_when_gone(receive: Receive, turn: ActiveTurn) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            log.info(
                "room %s: the forward of %s went away; stopping its turn",
                turn.message.room_id,
                turn.message.id,
            )
            turn.abort(AbortKind.STOP, "the bridge cancelled the forward")
            return


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request body, or None past `limit` bytes."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk: bytes = message.get("body", b"")
        body += chunk
        if len(body) > limit:
            return None
        if not message.get("more_body"):
            return body


async def serve_host(
    app: HostApp,
    *,
    api_key: str,
    rest_url: str,
    host: str,
    port: int,
    stop: trio.Event,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app` on `host:port` until `stop`, with the identity's REST client;
    `task_status.started(bound_port)`. Turns still open at the end get the grace,
    then are cancelled like a shutdown: their messages are left `processing`."""
    async with app.adapter.lifespan(), RestClient(rest_url, api_key, policy=app.policy) as rest:
        app.bind(rest)
        await serve_app(
            app, host, port, stop, app.bridge_policy.health_grace, task_status=task_status
        )
