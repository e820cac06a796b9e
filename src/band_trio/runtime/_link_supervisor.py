"""The link supervisor: check the key, then one connection at a time, for good.

    Link.run
    ├── close watcher              on `close()`: a clean close frame, then the end
    ├── GET /me                    the key (refused: a clear error out of `Agent.run`)
    └── connections, one at a time, with backoff between them
        └── connection nursery     the socket (reader, heartbeat)
            └── work               cancelled the moment the socket closes:
                ├── set-up             join the agent's topics, list the rooms,
                │                      reconcile them, join each room
                └── room joins         one task for every room's joins, the set-up's
                                       and later ones (a `room_added` push)

A link may be given a connect limiter shared with other links (the bridge's
identities: `BridgePolicy.max_connects`). Each connection attempt then holds one
of its slots from the upgrade until the room list is read — the part of a
connect that costs the platform most — and gives it back before the room joins,
the connection's life and the backoff before a reconnect. So an attempt that
cannot succeed holds a slot only while it runs, under its own deadlines
(`connect_deadline`, `join_deadline`, the room list's `request_deadline` and
the retries the platform asks for with a 429 or 5xx), and links that connect
fine go on through the other slots. The key check (`GET /me`, once per run)
takes no slot: a refused key ends the link without waiting for one.

The link owns each connection and hands it down: a room learns which socket
its topics are joined on (`Room.joined`), and uses it to leave. A close at any
moment — during the room list, a join, or a quiet hour — ends that
connection's work at once and leads to one reconnect through the backoff.
A close the platform declares final (1008, an upgrade refused 400/401/403/409,
a `supersede` that is not retryable) ends the link with the reason.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from .. import errors
from ..contract import Adapter, AgentInfo, adapter_failure
from ..link import CLOSE_HEARTBEAT_DEAD, RestClient, Socket, SocketStats, run_socket
from ..observe import hooks as observe
from ..policy import Policy
from ..wire import AgentProfile, RefCounter, RoomSummary
from ._connection import Connection
from ._context import Changes
from ._control import ControlLane
from ._hosting import LinkedRooms
from ._reconnect import TERMINAL_CLOSE_CODES, TERMINAL_UPGRADE_STATUSES, Backoff

__all__ = ["ConnectSlot", "Link", "LinkEnd", "LinkSettings"]

log = logging.getLogger("band_trio.runtime.link")


@dataclass(frozen=True, slots=True)
class LinkSettings:
    agent_id: str
    api_key: str
    ws_url: str
    reject_conflict: bool = False


@dataclass
class LinkEnd:
    """Why the link ended: asked to (neither set), for good, or at start-up."""

    terminal: errors.DisconnectReason | None = None
    error: errors.BandTrioError | None = None
    """The key or the platform failed the start-up check (`GET /me`), or the adapter
    its `on_started`."""


class Link:
    """One agent's link to the platform; `run` it, `close()` it."""

    def __init__(
        self,
        settings: LinkSettings,
        *,
        rest: RestClient,
        adapter: Adapter | None,
        rooms: LinkedRooms,
        control: ControlLane,
        policy: Policy,
        stats: SocketStats,
        refs: RefCounter,
        changes: Changes,
        disconnect_reason: errors.DisconnectReason | None = None,
        tap: Callable[[str, str, Any], None] | None = None,
        connects: trio.CapacityLimiter | None = None,
    ) -> None:
        self._settings = settings
        self._connects = connects
        """Shared with other links: one slot per connection attempt, for its set-up."""
        self._tap = tap
        """Shown every live push after the link routed it (the bridge forwards from it);
        called on the socket's reader, so it must not block."""
        self._rest = rest
        self._adapter = adapter
        self._rooms = rooms
        self._control = control
        self._policy = policy
        self._stats = stats
        self._refs = refs
        self._changes = changes
        self._closing = trio.Event()
        self._ended_by = "closed"
        """Why the last connection ended, as the reconnect counts it."""
        self.socket: Socket | None = None
        """The open connection, if any (for observation)."""
        self.connects = 0
        """Connections that finished joining."""
        self.failed_attempts = 0
        """Connection attempts that ended before joining (refused, unreachable, cut)."""
        self.disconnect_reason = disconnect_reason
        """Why the platform last ended the session for good (carried over from an earlier
        run of the agent); cleared by a fresh connect."""

    def close(self) -> None:
        """Ask the link to end: close the open connection with a close frame, connect
        no more. `run` returns soon after, whatever phase it was in."""
        self._closing.set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> LinkEnd:
        """Serve until closed or ended for good; `task_status.started()` once the first
        connection has joined its rooms."""
        end = LinkEnd()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._close_when_asked, nursery.cancel_scope)
            await self._serve(end, task_status)
            nursery.cancel_scope.cancel()
        return end

    async def _close_when_asked(self, scope: trio.CancelScope) -> None:
        await self._closing.wait()
        socket = self.socket
        if socket is not None:
            await socket.aclose()  # a clean close frame, bounded by the close deadline
        scope.cancel(reason="the agent is stopping")

    async def _serve(self, end: LinkEnd, task_status: trio.TaskStatus[None]) -> None:
        try:
            profile = await self._rest.me()
        except errors.PlatformError as exc:
            end.error = exc
            return
        end.error = await self._adapter_started(profile)
        if end.error is not None:
            return
        policy = self._policy
        backoff = Backoff(
            base=policy.reconnect_base,
            cap=policy.reconnect_cap,
            stable_after=policy.reconnect_stable,
        )
        started = False
        while True:
            joined = self.connects
            retry_after, terminal = await self._connection(backoff, task_status, started)
            if self.connects == joined:
                self.failed_attempts += 1
                self._changes.notify()
            started = started or self.connects > 0
            if terminal is not None:
                log.info("disconnected for good: %s", terminal)  # run() raises it
                self.disconnect_reason = end.terminal = terminal
                return
            if self._closing.is_set():
                return
            delay = backoff.delay(retry_after)
            log.info("reconnecting in %.1fs: %s", delay, self._ended_by)
            observe.reconnecting(self._ended_by)
            await trio.sleep(delay)

    async def _adapter_started(self, profile: AgentProfile) -> errors.AdapterError | None:
        """`Adapter.on_started`, once per run before any room is served, under its deadline."""
        if self._adapter is None:  # a link with no adapter behind it (the bridge)
            return None
        info = AgentInfo(
            id=profile.id, name=profile.name, handle=profile.handle, description=profile.description
        )
        deadline = self._policy.hook_deadline
        try:
            with trio.fail_after(deadline):
                await self._adapter.on_started(info)
        except trio.TooSlowError:
            late = f"the adapter's on_started ran past its {deadline:g}s deadline"
            return errors.AdapterError(late)
        except BaseException as exc:
            if not adapter_failure(exc):
                raise
            log.debug("on_started failed", exc_info=exc)
            failed = f"the adapter's on_started failed: {type(exc).__name__}: {exc}"
            return errors.AdapterError(failed)
        return None

    async def _connection(
        self, backoff: Backoff, task_status: trio.TaskStatus[None], started: bool
    ) -> tuple[float | None, errors.DisconnectReason | None]:
        """One connection, from the upgrade to the close: (Retry-After, a final reason)."""
        settings = self._settings
        conn = Connection(
            agent_id=settings.agent_id,
            rooms=self._rooms,
            control=self._control,
            policy=self._policy,
            tap=self._tap,
        )
        refused: errors.PlatformResponseError | None = None
        failed: BaseException | None = None
        self._ended_by = "closed"
        slot = ConnectSlot(self._connects, self._changes)
        try:
            await slot.acquire()
            async with trio.open_nursery() as nursery:
                socket: Socket = await nursery.start(
                    functools.partial(
                        run_socket,
                        settings.ws_url,
                        agent_id=settings.agent_id,
                        api_key=settings.api_key,
                        on_push=conn.on_push,
                        refs=self._refs,
                        stats=self._stats,
                        policy=self._policy,
                        reject_conflict=settings.reject_conflict and not started,
                    )
                )
                conn.socket = self.socket = socket
                self.disconnect_reason = None  # a fresh connect clears it
                log.info("connected to %s as %s", settings.ws_url, settings.agent_id)
                self._changes.notify()
                try:
                    await self._work(conn, socket, backoff, task_status, started, slot)
                finally:
                    conn.live = False
                    self.socket = None
                    self._changes.notify()
                    await socket.aclose()
        except* errors.PlatformResponseError as group:  # the upgrade was refused
            leaf = group.exceptions[0]
            assert isinstance(leaf, errors.PlatformResponseError)
            refused = leaf
        except* errors.PlatformError as group:
            failed = _leaf(group)
        finally:
            slot.release()
        if refused is not None:
            if refused.status in TERMINAL_UPGRADE_STATUSES:
                return None, errors.DisconnectReason(
                    reason=refused.code or f"http_{refused.status}",
                    message=refused.message,
                    retry_after=refused.retry_after,
                    correlation_id=refused.request_id,
                )
            log.warning("websocket upgrade refused (%s); retrying", refused)
            self._ended_by = "upgrade_refused"
            return refused.retry_after, None
        if failed is not None:
            log.warning("connection failed: %s", failed)
            self._ended_by = "connect_failed"
            return None, None
        backoff.disconnected(trio.current_time())
        log.info("websocket closed (code %s: %s)", socket.close_code, socket.close_reason)
        if self._ended_by != "setup_failed":
            self._ended_by = _why_closed(socket.close_code, conn.superseded)
        if conn.terminal is not None:
            return None, conn.terminal
        if socket.close_code in TERMINAL_CLOSE_CODES:
            return None, errors.DisconnectReason(
                reason=f"close_{socket.close_code}",
                message=socket.close_reason or "closed by the platform for good",
            )
        return None, None

    async def _work(
        self,
        conn: Connection,
        socket: Socket,
        backoff: Backoff,
        task_status: trio.TaskStatus[None],
        started: bool,
        slot: ConnectSlot,
    ) -> None:
        """The connection's work, from set-up until the socket closes."""
        async with trio.open_nursery() as work:
            conn.work = work
            work.start_soon(_end_with, socket, work.cancel_scope)
            joiner = conn.start_joins(socket, work)

            def join_listed(rooms: list[RoomSummary]) -> None:
                """A page of the room list came: join its rooms now, not after the last."""
                for summary in rooms:
                    room = self._rooms.get(summary.id) or self._rooms.add(summary.id)
                    if room is not None:
                        joiner.add(room)

            try:
                await conn.join_agent_topics(socket)
                wanted = [summary.id for summary in await self._rest.rooms(join_listed)]
                slot.release()  # the costly part of the connect is done
                self._rooms.reconcile(wanted)  # leaves the rooms no longer listed
                for room in list(self._rooms.current.values()):
                    joiner.add(room)  # those kept from an earlier connection, once
                await joiner.wait_done()
            except errors.PlatformError as exc:
                log.warning("connection set-up failed (%s); closing it to start over", exc)
                self._ended_by = "setup_failed"
                await socket.aclose()
                return
            self.connects += 1
            backoff.connected(trio.current_time())
            conn.ready = True
            observe.connected()
            log.info("joined %d room(s) of %d", conn.joined, len(self._rooms.current))
            self._changes.notify()
            if not started:
                task_status.started()
            await trio.sleep_forever()  # until the socket closes and `_end_with` ends this


def _why_closed(code: int | None, superseded: bool) -> str:
    """Why a socket closed, as `band_trio_reconnects_total` counts it."""
    if superseded:
        return "superseded"
    if code == CLOSE_HEARTBEAT_DEAD:
        return "heartbeat_timeout"
    return "closed" if code in (1000, 1001) else "dropped"


class ConnectSlot:
    """One connection attempt's hold on a shared connect limiter (none: no limit).

    `release` may be called more than once (at the end of the set-up, and again
    on the way out of the attempt): only the first gives the slot back. Waiting
    for a slot and getting one pulse `Changes`, so `/health` and a test see who
    waits."""

    __slots__ = ("_changes", "_held", "_limiter")

    def __init__(self, limiter: trio.CapacityLimiter | None, changes: Changes) -> None:
        self._limiter = limiter
        self._changes = changes
        self._held = False

    async def acquire(self) -> None:
        limiter = self._limiter
        if limiter is None:
            return
        if limiter.available_tokens == 0:
            self._changes.notify()  # one more waiting
        await limiter.acquire_on_behalf_of(self)
        self._held = True
        self._changes.notify()

    def release(self) -> None:
        if self._held and self._limiter is not None:
            self._held = False
            self._limiter.release_on_behalf_of(self)
            self._changes.notify()


async def _end_with(socket: Socket, scope: trio.CancelScope) -> None:
    """End a connection's work the moment its socket closes."""
    await socket.closed.wait()
    scope.cancel(reason="the websocket closed")


def _leaf(error: BaseException) -> BaseException:
    """The first leaf of a (possibly nested) exception group, for a readable log line."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
