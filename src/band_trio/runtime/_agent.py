"""The agent: one nursery that owns the link, the control lane and every room.

    Agent.run
    ├── rooms host (nursery)        one task per room: Room.run
    └── link loop                   connect, join, sync rooms, wait for close, reconnect

`Agent.stop()` is graceful and ordered: rooms stop taking work, running turns
get the policy's shutdown grace, then the rooms' scopes are cancelled (each
leaves its topics under a shielded deadline), then the socket is closed with a
close frame, and only then does `run()` return.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import trio

from .. import errors
from ..contract import Adapter
from ..link import RestClient, Socket, SocketStats, run_socket
from ..policy import Policy
from ..wire import (
    AgentControl,
    MessageCreated,
    RefCounter,
    RoomAdded,
    RoomDeleted,
    RoomRemoved,
    Supersede,
)
from ._control import ControlLane
from ._inbound import inbound
from ._ledger import Ledger
from ._reconnect import TERMINAL_CLOSE_CODES, TERMINAL_UPGRADE_STATUSES, Backoff
from ._room import Overrun, Room, RoomContext

__all__ = ["Agent", "StopResult"]

log = logging.getLogger("band_trio.runtime.agent")


@dataclass(frozen=True, slots=True)
class StopResult:
    """What `Agent.stop()` found."""

    graceful: bool
    """True if every running turn finished within the shutdown grace."""
    cancelled: tuple[tuple[str, str], ...] = ()
    """(room id, message id) of each turn cancelled after the grace; left `processing`."""
    overran: tuple[Overrun, ...] = ()
    """Work that outlived its cleanup grace after being cancelled (during the run or the
    stop). `run()` still owns it and returns only once it has ended."""


class Agent:
    """A Band agent running `adapter` in every room it is a participant of.

    Run it in a nursery: `await nursery.start(agent.run)` returns once the
    agent is connected and its rooms are joined; `await agent.stop()` stops it.
    """

    def __init__(
        self,
        adapter: Adapter,
        *,
        agent_id: str,
        api_key: str,
        rest_url: str,
        ws_url: str,
        policy: Policy | None = None,
        reject_conflict: bool = False,
    ) -> None:
        for name, value in (
            ("agent_id", agent_id),
            ("api_key", api_key),
            ("rest_url", rest_url),
            ("ws_url", ws_url),
        ):
            if not value:
                raise errors.ConfigurationError(f"{name} is required")
        self.adapter = adapter
        self.agent_id = agent_id
        self._api_key = api_key
        self.rest_url = rest_url
        self.ws_url = ws_url
        self.policy = policy or Policy()
        self._reject_conflict = reject_conflict
        self.stats = SocketStats()
        self._refs = RefCounter()
        self._rooms: dict[str, Room] = {}
        self._ledgers: dict[str, Ledger] = {}
        """Per room, for the agent's lifetime: the adapter never runs twice for a message in
        one process, even if the room is left and joined again."""
        self._control = ControlLane(
            lambda: self._rooms, memory=self.policy.control_dedup_memory, changed=self._notify
        )
        self._socket: Socket | None = None
        self._rest: RestClient | None = None
        self._rooms_nursery: trio.Nursery | None = None
        self._rooms_done = trio.Event()
        self._changed = trio.Event()
        self._stopping = False
        self._stopped = trio.Event()
        self._stop_result: StopResult | None = None
        self._running = False
        self._done = trio.Event()
        self._terminal: errors.DisconnectReason | None = None
        self._overruns: list[Overrun] = []
        self._top = trio.CancelScope()
        self._generation = 0
        """Counts connections; a push from an older one is dropped."""
        self.connects = 0
        """How many times the agent connected and finished joining (1 + reconnects)."""
        self.last_disconnect_reason: errors.DisconnectReason | None = None

    @classmethod
    def from_env(cls, adapter: Adapter, **overrides: Any) -> Agent:
        """Settings from `BAND_AGENT_ID`, `BAND_API_KEY`, `BAND_REST_URL`, `BAND_WS_URL`."""
        settings: dict[str, Any] = {
            "agent_id": os.environ.get("BAND_AGENT_ID", ""),
            "api_key": os.environ.get("BAND_API_KEY", ""),
            "rest_url": os.environ.get("BAND_REST_URL", ""),
            "ws_url": os.environ.get("BAND_WS_URL", ""),
        }
        settings.update({k: v for k, v in overrides.items() if v is not None})
        return cls(adapter, **settings)

    # -- state ---------------------------------------------------------------

    @property
    def rooms(self) -> Mapping[str, Room]:
        """The rooms the agent is in, by id (read-only view)."""
        return dict(self._rooms)

    @property
    def connected(self) -> bool:
        return self._socket is not None and not self._socket.closed.is_set()

    @property
    def control(self) -> ControlLane:
        return self._control

    # -- running -------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect and serve until `stop()`; `task_status.started()` once rooms are joined.

        Raises `AgentDisconnectedError` if the platform ends the session for good,
        and `AuthenticationError` if the key is refused at start-up.
        """
        if self._running:
            raise RuntimeError("Agent.run() is already running")
        self._running = True
        self._reset_run_state()
        try:
            async with RestClient(self.rest_url, self._api_key, policy=self.policy) as rest:
                self._rest = rest
                await rest.me()
                async with trio.open_nursery() as top:
                    self._top = top.cancel_scope
                    await top.start(self._host_rooms)
                    await self._serve_link(task_status)
                    top.cancel_scope.cancel(reason="agent stopped")
        finally:
            self._done.set()
            self._running = False
        if self._terminal is not None:
            raise errors.AgentDisconnectedError(self._terminal)

    def _reset_run_state(self) -> None:
        """Fresh per-run state, so an agent can run again after it stopped or was
        disconnected (its ledgers, and `last_disconnect_reason`, carry over)."""
        self._done = trio.Event()
        self._rooms_done = trio.Event()
        self._stopping = False
        self._stopped = trio.Event()
        self._stop_result = None
        self._terminal = None
        self._overruns = []

    async def stop(self) -> StopResult:
        """Stop gracefully: finish running turns within the shutdown grace, then cancel.

        Calling it again while a stop is under way waits for that stop and returns
        its result; calling it when the agent is not running returns at once.
        """
        if self._stopping:
            await self._stopped.wait()
            assert self._stop_result is not None
            return self._stop_result
        if not self._running or self._done.is_set():
            return StopResult(graceful=True)
        self._stopping = True
        try:
            self._stop_result = await self._stop()
        finally:
            self._stopped.set()
        return self._stop_result

    async def _stop(self) -> StopResult:
        for room in self._rooms.values():
            room.drain()
        with trio.move_on_after(self.policy.shutdown_grace):
            await self.wait_until(lambda: all(room.turn is None for room in self._rooms.values()))
        cancelled = tuple(
            (room.id, room.turn.message.id) for room in self._rooms.values() if room.turn
        )
        if cancelled:
            log.warning("stopping with %d turn(s) still running: cancelling them", len(cancelled))
        if self._rooms_nursery is not None:
            self._rooms_nursery.cancel_scope.cancel(reason="agent stopping")
        grace = self.policy.cleanup_grace
        with trio.move_on_after(grace):
            await self._rooms_done.wait()
        for room in self._rooms.values():  # rooms leave this dict when their task ends
            message_id = room.turn.message.id if room.turn is not None else None
            self._overruns.append(Overrun(room.id, message_id, "room ignored the stop"))
            log.error(
                "room %s (turn %s) still running %.1fs after the stop", room.id, message_id, grace
            )
        socket = self._socket
        if socket is not None:
            await socket.aclose()  # a clean close frame, while the reader can still see it
        # whatever the link is doing now (backoff, a handshake, a join), it is done
        self._top.cancel(reason="agent stopped")
        with trio.move_on_after(grace):
            await self._done.wait()
        overran = tuple(self._overruns)
        return StopResult(
            graceful=not cancelled and not overran, cancelled=cancelled, overran=overran
        )

    async def _host_rooms(self, task_status: trio.TaskStatus[None]) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._rooms_nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._rooms_done.set()

    def _room_context(self) -> RoomContext:
        assert self._rest is not None
        return RoomContext(
            agent_id=self.agent_id,
            rest=self._rest,
            adapter=self.adapter,
            policy=self.policy,
            socket=lambda: self._socket,
            changed=self._notify,
            overran=self._overruns.append,
        )

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, re-checked after every change of the agent's
        state: a turn starting or ending, a room joined, left, stopped or played, the
        socket connecting or closing. The caller sets the deadline."""
        while not predicate():
            await self._changed.wait()

    def _add_room(self, room_id: str) -> Room | None:
        if room_id in self._rooms or self._stopping or self._rooms_nursery is None:
            return None
        ledger = self._ledgers.get(room_id)
        if ledger is None:
            ledger = self._ledgers[room_id] = Ledger(
                max_attempts=self.policy.max_attempts, memory=self.policy.completed_memory
            )
        room = Room(room_id, self._room_context(), ledger)
        self._rooms[room_id] = room
        self._rooms_nursery.start_soon(self._run_room, room, name=f"room {room_id}")
        self._notify()
        return room

    async def _run_room(self, room: Room) -> None:
        try:
            await room.run()
        finally:
            if self._rooms.get(room.id) is room:
                del self._rooms[room.id]
            self._notify()

    def _remove_room(self, room_id: str) -> None:
        room = self._rooms.pop(room_id, None)
        if room is not None:
            log.info("left room %s", room_id)
            room.scope.cancel(reason="left the room")

    # -- the link ------------------------------------------------------------

    async def _serve_link(self, task_status: trio.TaskStatus[None]) -> None:
        """Connect, join and sync; wait for the close; reconnect unless it was final."""
        policy = self.policy
        backoff = Backoff(
            base=policy.reconnect_base,
            cap=policy.reconnect_cap,
            stable_after=policy.reconnect_stable,
        )
        started = False
        while True:
            retry_after: float | None = None
            self._generation += 1
            try:
                async with trio.open_nursery() as connection:
                    socket: Socket = await connection.start(
                        functools.partial(
                            run_socket,
                            self.ws_url,
                            agent_id=self.agent_id,
                            api_key=self._api_key,
                            on_push=functools.partial(self._on_push, self._generation),
                            refs=self._refs,
                            stats=self.stats,
                            policy=policy,
                            reject_conflict=self._reject_conflict and not started,
                        )
                    )
                    self._socket = socket
                    self.last_disconnect_reason = None  # a fresh connect clears it
                    try:
                        await self._on_connected(socket)
                        if not started:
                            started = True
                            task_status.started()
                        backoff.connected(trio.current_time())
                        self.connects += 1
                        self._notify()
                        await socket.closed.wait()
                    finally:
                        self._socket = None
                        self._notify()
                        await socket.aclose()
                backoff.disconnected(trio.current_time())
                log.info("websocket closed (code %s: %s)", socket.close_code, socket.close_reason)
                if socket.close_code in TERMINAL_CLOSE_CODES and self._terminal is None:
                    self._terminal = errors.DisconnectReason(
                        reason=f"close_{socket.close_code}",
                        message=socket.close_reason or "closed by the platform for good",
                    )
            except* errors.PlatformResponseError as group:
                error = group.exceptions[0]
                assert isinstance(error, errors.PlatformResponseError)
                if error.status in TERMINAL_UPGRADE_STATUSES:
                    self._terminal = errors.DisconnectReason(
                        reason=error.code or f"http_{error.status}",
                        message=error.message,
                        retry_after=error.retry_after,
                        correlation_id=error.request_id,
                    )
                else:
                    log.warning("websocket upgrade refused (%s); retrying", error)
                    retry_after = error.retry_after
            except* (errors.PlatformError, errors.JoinError, errors.ConnectionClosedError) as group:
                log.warning("connection failed: %s", _leaf(group))
            if self._terminal is not None:
                log.error("disconnected for good: %s", self._terminal)
                self.last_disconnect_reason = self._terminal
                return
            if self._stopping:
                return
            await trio.sleep(backoff.delay(retry_after))

    async def _on_connected(self, socket: Socket) -> None:
        """Join the agent's topics, reconcile the room list, and rejoin and resync rooms.

        Rooms rejoin concurrently (each still joins `chat_room` before
        `room_participants`), so a reconnect with many rooms is one round trip deep.
        """
        await socket.join(f"agent_control:{self.agent_id}")
        await socket.join(f"agent_rooms:{self.agent_id}")
        assert self._rest is not None
        wanted = [summary.id for summary in await self._rest.rooms()]
        for gone in set(self._rooms) - set(wanted):
            self._remove_room(gone)
        fresh: list[Room] = []
        async with trio.open_nursery() as rejoins:
            for room_id in wanted:
                room = self._rooms.get(room_id)
                if room is None:
                    added = self._add_room(room_id)
                    if added is not None:
                        fresh.append(added)
                elif room.ready.is_set():
                    rejoins.start_soon(self._rejoin, room, socket)
        for room in fresh:
            await room.ready.wait()

    @staticmethod
    async def _rejoin(room: Room, socket: Socket) -> None:
        await room.join_topics(socket)
        room.request_resync()

    def _on_push(self, generation: int, topic: str, event: str, payload: Any) -> None:
        """Route one push; runs in the reader, so it never awaits."""
        if generation != self._generation:
            log.debug("dropped %s from an older connection", event)
            return
        if isinstance(payload, MessageCreated):
            if event != "message_created":
                return
            room_id = topic.partition(":")[2]
            room = self._rooms.get(room_id)
            if room is not None:
                room.push(inbound(room_id, self.agent_id, payload))
        elif isinstance(payload, AgentControl):
            self._control.apply(payload)
        elif isinstance(payload, RoomAdded) and not isinstance(payload, RoomRemoved):
            self._add_room(payload.id)
        elif isinstance(payload, RoomRemoved | RoomDeleted):
            self._remove_room(payload.id)
        elif isinstance(payload, Supersede):
            self._on_supersede(payload)
        else:
            log.debug("ignored %s on %s", event, topic)

    def _on_supersede(self, payload: Supersede) -> None:
        log.warning("superseded by the platform: %s (%s)", payload.reason, payload.message)
        if not payload.retryable:
            self._terminal = errors.DisconnectReason(
                reason=payload.reason,
                message=payload.message,
                retryable=False,
                retry_after=payload.retry_after,
                correlation_id=payload.correlation_id,
            )
            if self._socket is not None:
                self._socket.close_soon()


def _leaf(error: BaseException) -> BaseException:
    """The first leaf of a (possibly nested) exception group, for a readable log line."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
