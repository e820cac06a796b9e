"""One bridged agent identity: its link, its rooms, its target — a runner of its own.

    Identity.run (nursery)
    ├── rooms host              the runtime's rooms, one task per room, each unit
    │                           a forward (`_forward`), under the rules where a
    │                           bridged identity differs (`RoomRules`: events
    │                           are units too, who claims, what a unit is called)
    └── the link                the runtime's: key check, connections, joins,
                                reconnects, signal routing, message pushes to
                                their rooms; its tap hands each room and
                                participant event to its room

The runner ends when it is closed (gracefully: the link closes first, the
forwards in flight get the shutdown grace) or when the platform ends the
session for good — a terminal disconnect, or a key refused at start-up. Then
it ends at once with the typed reason, logged; the bridge's other identities
go on.
"""

from __future__ import annotations

import dataclasses
import logging
from contextlib import AsyncExitStack
from typing import Any

import trio

from .. import errors
from ..contract import Cutoff, Threads
from ..link import RestClient, SocketStats
from ..observe import hooks as observe
from ..policy import BusyPolicy, Policy
from ..runtime import RemoteStopStats
from ..runtime.parts import (
    AbortKind,
    Changes,
    ControlLane,
    Journal,
    Ledger,
    Link,
    LinkEnd,
    LinkSettings,
    RemoteStopLog,
    RoomContext,
    RoomRules,
    Rooms,
)
from ..wire import RefCounter
from ._config import IdentityConfig
from ._envelope import FORWARDED_EVENTS
from ._forward import Counters, Forwarder
from ._policy import BridgePolicy
from ._targets import TargetClients, open_target

__all__ = ["Identity", "IdentityStatus"]

log = logging.getLogger("band_trio.bridge")


@dataclasses.dataclass(frozen=True, slots=True)
class IdentityStatus:
    """One identity as `GET /health` shows it."""

    name: str
    agent_id: str
    connected: bool
    rooms: int
    forwards_in_flight: int
    delivered: int
    failed: int
    cancelled: int
    dropped: int
    overflowed: int
    """Times a room's queue was full and its messages left to a `/next` catch-up."""
    remote_stops: dict[str, int]
    """How the remote stops of cancelled forwards ended (A2A tasks, process groups)."""
    threads: dict[str, int]
    """The identity's worker threads: the limit, running now, abandoned by an aborted
    forward (ever), and of those still running."""
    last_disconnect_reason: errors.DisconnectReason | None
    ended: str | None
    """Why the runner ended, if it did (a terminal disconnect, a refused key)."""


class Identity:
    """Runs one identity; `run` it in the bridge's nursery, `close()` to stop it."""

    def __init__(
        self,
        config: IdentityConfig,
        *,
        policy: Policy,
        bridge_policy: BridgePolicy,
        limiter: trio.CapacityLimiter,
        changes: Changes,
        connects: trio.CapacityLimiter | None = None,
    ) -> None:
        self.config = config
        self._policy = policy
        self._bridge_policy = bridge_policy
        self._limiter = limiter
        self._connects = connects
        """The bridge's connect limiter, shared by every identity's link."""

        self._changes = changes
        self._closing = trio.Event()
        self._hard: str | None = None
        self._cutoff = Cutoff()
        """Every shielded wait of this identity's forwards ends by it (a hard stop)."""
        self._threads = Threads(policy.adapter_threads)
        self._link: Link | None = None
        self._rooms: Rooms | None = None
        self.counters = Counters()
        """The run's forwards and rooms (catch-ups, cancels, drops, overflows), as
        `GET /health` shows them; a new run counts afresh."""
        self._ledgers: dict[str, Ledger] = {}
        """Per room, kept across runs: a message forwarded (or given up) is not forwarded
        again by this process, even if the room is left and rejoined."""
        self._stops = RemoteStopLog()
        self.disconnect_reason: errors.DisconnectReason | None = None
        self.journal = Journal()
        """What the shutdowns cancelled after their grace, and what overran its cleanup."""
        self.ended: str | None = None
        self.stats = SocketStats()

    # -- observation -----------------------------------------------------------

    @property
    def connected(self) -> bool:
        socket = self._link.socket if self._link is not None else None
        return socket is not None and not socket.closed.is_set()

    @property
    def link_connects(self) -> int:
        """Connections of this run that finished joining their rooms."""
        return self._link.connects if self._link is not None else 0

    @property
    def link_failures(self) -> int:
        """Connection attempts of this run that ended before joining."""
        return self._link.failed_attempts if self._link is not None else 0

    @property
    def settled(self) -> bool:
        """Connected, ended, or one connection attempt failed: what the ready line
        waits for, so an identity that cannot connect never holds it back."""
        return self.link_connects > 0 or self.link_failures > 0 or self.ended is not None

    @property
    def rooms_idle(self) -> bool:
        """No forward in flight or queued in any room, no catch-up under way or due."""
        return self._rooms is None or self._rooms.idle

    @property
    def rooms(self) -> Rooms | None:
        return self._rooms

    @property
    def remote_stops(self) -> RemoteStopStats:
        """How the remote stops of this identity's cancelled forwards ended."""
        return self._stops.stats

    def status(self) -> IdentityStatus:
        counters = self.counters
        stops = self.remote_stops
        rooms = self._rooms
        link = self._link
        return IdentityStatus(
            name=self.config.name,
            agent_id=self.config.agent_id,
            connected=self.connected,
            rooms=len(rooms.current) if rooms is not None else 0,
            forwards_in_flight=counters.in_flight,
            delivered=counters.delivered,
            failed=counters.failed,
            cancelled=counters.cancelled,
            dropped=counters.dropped,
            overflowed=counters.overflowed,
            remote_stops={
                "confirmed": stops.confirmed,
                "requested": stops.requested,
                "unconfirmed": stops.unconfirmed,
            },
            threads=dataclasses.asdict(self._threads.stats),
            last_disconnect_reason=link.disconnect_reason if link else self.disconnect_reason,
            ended=self.ended,
        )

    # -- control ---------------------------------------------------------------

    def close(self) -> None:
        """Stop gracefully: the link closes, forwards in flight get the shutdown grace."""
        self._closing.set()

    def hard_stop(self, reason: str) -> None:
        """Stop at once: every forward is aborted (its message left), every shielded
        wait of the rooms ends within `Policy.hard_stop_grace`, and the link closes."""
        self._hard = reason  # the rooms host cuts the cutoff (at once, or when it exists)
        if self._rooms is not None:
            self._rooms.hard_stop(reason)
        self._closing.set()

    # -- the runner ------------------------------------------------------------

    async def run(self, clients: TargetClients) -> LinkEnd:
        """Serve until closed or ended for good; the end says which. An HTTP target's
        client comes from `clients` (the bridge's, one per origin: it closes them)."""
        config = self.config
        tracked = observe.track(self._sample)  # the gauges of /metrics, while it runs
        try:
            async with AsyncExitStack() as stack:
                rest = await stack.enter_async_context(
                    RestClient(config.rest_url, config.api_key, policy=self._policy)
                )
                target = await open_target(config.target, self._bridge_policy, clients)
                settles = config.target.settle == "bridge"
                self.counters = Counters()
                forwarder = Forwarder(
                    config.agent_id, target, rest=rest, limiter=self._limiter,
                    policy=self._policy, bridge_policy=self._bridge_policy,
                    changes=self._changes, settles=settles, counters=self.counters,
                )  # fmt: skip
                context = RoomContext(
                    agent_id=config.agent_id, rest=rest, adapter=forwarder,
                    policy=self._policy.replace(
                        room_inbox=self._bridge_policy.room_queue,
                        completed_memory=self._bridge_policy.forwarded_memory,
                    ),
                    busy=BusyPolicy(), changes=self._changes, journal=self.journal,
                    stops=self._stops, threads=self._threads, cutoff=self._cutoff,
                    rules=RoomRules(claims=settles, events=True, work="forward"),
                    call=forwarder, counts=self.counters,
                )  # fmt: skip
                rooms = Rooms(context, self._ledgers, what="bridge room",
                              shutdown_grace=self._bridge_policy.shutdown_grace)  # fmt: skip
                end = await self._serve(rooms, rest)
        finally:
            observe.untrack(tracked)
            self._changes.notify()
            grace = min(self._policy.backend_stop_grace, self._cutoff.at - trio.current_time())
            await self._threads.aclose(max(0.0, grace))  # a no-op unless a target used it
        self._record(end)
        return end

    def _sample(self) -> observe.Sample:
        rooms = self._rooms.current.values() if self._rooms is not None else ()
        return observe.Sample(
            "forward",
            in_progress=self.counters.in_flight,
            queued=sum(room.queued for room in rooms),
            connected=int(self.connected),
            rooms=len(rooms),
            rooms_joined=sum(1 for room in rooms if room.joined_now),
        )

    async def _serve(self, rooms: Rooms, rest: RestClient) -> LinkEnd:
        config = self.config
        self._rooms = rooms
        if self._hard is not None:  # a hard stop before the rooms existed
            rooms.hard_stop(self._hard)
        link = self._link = Link(
            LinkSettings(config.agent_id, config.api_key, config.ws_url),
            rest=rest,
            adapter=None,
            rooms=rooms,
            control=ControlLane(memory=self._policy.control_dedup_memory, changes=self._changes),
            policy=self._policy,
            stats=self.stats,
            refs=RefCounter(),
            changes=self._changes,
            disconnect_reason=self.disconnect_reason,
            tap=self._tap,
            connects=self._connects,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(rooms.run)
            nursery.start_soon(self._close_when_asked, link)
            end = await link.run()
            if end.terminal is None and end.error is None:
                # asked to stop: the rooms forward what they hold within the shutdown
                # grace; then the host aborts what still runs (its message left) and
                # waits for it, each remote start bounded by the stop grace
                rooms.close()
                await rooms.settled.wait()
            else:  # ended for good: what still runs is aborted now, then cancelled
                rooms.end_all(AbortKind.SHUTDOWN, "the session ended for good")
            nursery.cancel_scope.cancel(reason="identity ended")
        self.disconnect_reason = link.disconnect_reason
        return end

    async def _close_when_asked(self, link: Link) -> None:
        await self._closing.wait()
        link.close()

    def _record(self, end: LinkEnd) -> None:
        name = self.config.name
        if end.terminal is not None:
            reason = end.terminal
            self.ended = f"disconnected for good: {reason.reason}: {reason.message}"
            log.error("identity %s (%s) ended: %s", name, self.config.agent_id, self.ended)
        elif end.error is not None:
            self.ended = f"{type(end.error).__name__}: {end.error}"
            log.error("identity %s (%s) ended: %s", name, self.config.agent_id, self.ended)
        else:
            self.ended = "closed"
            log.info("identity %s closed", name)

    # -- the tap (the socket's reader: synchronous, no REST) --------------------

    def _tap(self, topic: str, event: str, payload: Any) -> None:
        """Room and participant events to their room's queue (messages reach it as an
        agent's do: the link pushes them). The link has routed the push first: a room
        added is served already, a room removed is gone (its event departs alone)."""
        if event not in FORWARDED_EVENTS or event == "message_created" or self._rooms is None:
            return
        if event in ("room_added", "room_removed", "room_deleted"):
            room_id = getattr(payload, "id", None)
        else:
            room_id = topic.partition(":")[2]
        if not isinstance(room_id, str):
            return
        room = self._rooms.get(room_id)
        if room is not None:
            room.offer_event(event, payload)
        elif event in ("room_removed", "room_deleted"):
            self._rooms.depart(event, payload, room_id)
