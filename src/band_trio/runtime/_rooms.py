"""The rooms host: one task per room, in a nursery it owns, across connections.

    RoomHost.run (nursery)
    └── room <id>               one task per room: the room's loop, restarted with
                                backoff if it crashes; then the room is closed
                                (its topics left, the adapter or target told)

One host serves the agent's rooms (`Rooms`: a turn per message) and each
bridged identity's (the same `Rooms`, whose turns forward: `RoomRules`). Rooms outlive
connections (a room keeps working over REST while the socket is down); the
link only tells each room which connection its topics are joined on.

Every cancel of a room is the host's, and each one records why on the unit in
flight *before* it cancels (`HostedRoom.ending`), in this one place:

* leaving (`remove`: a `room_removed` push, a refused join, a room gone from
  the list) — `LEFT`;
* the shutdown, once its grace is over (`close`) — `SHUTDOWN`;
* ending everything at once (`end_all`: the session ended for good);
* the hard stop (`hard_stop`: a second signal) — `SHUTDOWN`, after lowering the
  host's `Cutoff`, so every shielded wait of every room (remote starts and
  stops, marks, leaves) ends within `Policy.hard_stop_grace`;
* a cancel from outside (the owner's scope, a caller's deadline): the host's
  own task sees it with its rooms', and aborts every unit as `SHUTDOWN` as it
  unwinds.

So a remote start in flight is bounded by the stop grace whoever cancels, and
the message is left `processing`, never taken for the adapter's success or
failure.

Shutdown is the host's own, in order, when its owner asks (`close`): every
room drains (finishes the unit in hand, mark included, then ends its loop) for
up to the shutdown grace; then the rooms still running are cancelled — their
units shutdown-aborted, messages left `processing` — and get their bounded
cleanup. `settled` is set once every room has ended, except rooms whose adapter
ignores the cancel: those are reported as overrun and still owned (the owner's
task returns only once they end). A room that ends during the shutdown does
not leave its topics one by one: the owner closes the socket once `settled`,
and a closed connection's joins are all forgotten at once (one close frame
rather than two leaves and their replies per room: 20,000 round trips at
10,000 rooms). A room left while the host runs still leaves its topics.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

import trio

from ..contract import Cutoff
from ..policy import Policy
from ._context import Changes, Journal, RoomContext
from ._hosting import HostedRoom
from ._ledger import Ledger
from ._results import Overrun
from ._room import Room
from ._turn_state import AbortKind

__all__ = ["RoomHost", "Rooms"]

log = logging.getLogger("band_trio.runtime.rooms")

R = TypeVar("R", bound=HostedRoom)

_NAMED = 5
"""Running units a stop's waiting line names; the rest are counted."""


class RoomHost(Generic[R]):
    """Every room of one agent (or bridged identity), each a task of the host's nursery.

    `make(room_id)` builds a room; `shutdown_grace` is how long `close` lets the
    rooms finish what they are doing; `cutoff` is handed down to every unit the
    rooms run (the host lowers it for a hard stop)."""

    def __init__(
        self,
        make: Callable[[str], R],
        *,
        policy: Policy,
        changes: Changes,
        journal: Journal,
        cutoff: Cutoff,
        shutdown_grace: float,
        what: str = "room",
        unit: str = "turn",
    ) -> None:
        self._make = make
        self._policy = policy
        self._changes = changes
        self._journal = journal
        self.cutoff = cutoff
        self._shutdown_grace = shutdown_grace
        self._what = what
        self._unit = unit
        """What a room's unit of work is called in the stop's lines (a turn, a forward)."""
        self._rooms: dict[str, R] = {}
        self.current: Mapping[str, R] = types.MappingProxyType(self._rooms)
        """The rooms by id, read-only (a room leaves it as soon as it is left)."""
        self._live: dict[R, trio.CancelScope] = {}
        """Room tasks still running, with the scope that ends each."""
        self._nursery: trio.Nursery | None = None
        self._ended = trio.Event()
        self._closing = trio.Event()
        self._hard = False
        self.settled = trio.Event()
        """Set once a requested shutdown is over (see the module docstring)."""

    # -- synchronous: the link (pushes, the room list) and the owner -----------

    def get(self, room_id: str) -> R | None:
        return self._rooms.get(room_id)

    def add(self, room_id: str) -> R | None:
        """Start serving `room_id`; None if it is served already or the host is closing."""
        if room_id in self._rooms or self._nursery is None:
            return None
        room = self._make(room_id)
        self._rooms[room_id] = room
        self._start(room, f"{self._what} {room_id}")
        return room

    def adopt(self, room: R, name: str) -> None:
        """Run `room` as a task of the host without serving its id (a room's last
        event after it was left); it is cancelled and closed like any other."""
        if self._nursery is not None:
            self._start(room, name)

    def _start(self, room: R, name: str) -> None:
        assert self._nursery is not None
        scope = self._live[room] = trio.CancelScope()
        self._nursery.start_soon(self._host, room, scope, name=name)
        self._changes.notify()

    def remove(self, room_id: str, why: str) -> None:
        """Leave `room_id`: its unit in flight is aborted as `LEFT` (not an interrupt)."""
        room = self._rooms.pop(room_id, None)
        if room is None:
            return
        log.info("left room %s: %s", room_id, why)
        self._cancel(room, AbortKind.LEFT, why)
        self._changes.notify()

    def reconcile(self, wanted: Iterable[str]) -> None:
        """Make the rooms match the platform's room list: leave the gone, add the new."""
        wanted = list(wanted)
        for gone in set(self._rooms) - set(wanted):
            self.remove(gone, "no longer in the room list")
        for room_id in wanted:
            self.add(room_id)

    def close(self) -> None:
        """Ask for the shutdown; `settled` tells when it is over."""
        self._closing.set()

    def end_all(self, kind: AbortKind, reason: str) -> None:
        """Cancel every room task now (its unit in flight aborted with `kind` first)."""
        for room in list(self._live):
            self._cancel(room, kind, reason)

    def hard_stop(self, reason: str) -> None:
        """End everything at once: every shielded wait of every room ends within
        `Policy.hard_stop_grace` (the cutoff), every unit is aborted as `SHUTDOWN`,
        and the shutdown (asked for now, if it was not) skips its grace."""
        self.cutoff.cut(trio.current_time() + self._policy.hard_stop_grace)
        self._hard = True
        self.end_all(AbortKind.SHUTDOWN, reason)
        self._closing.set()
        self._pulse()

    def _cancel(self, room: R, kind: AbortKind, reason: str) -> None:
        room.ending(kind, reason)  # first: a start in flight is bounded, the message left
        self._live[room].cancel(reason=reason)

    def running(self) -> list[tuple[str, str]]:
        """(room, message) of every unit whose adapter (or target) is still at work."""
        return [
            (room.id, unit.control.message_id)
            for room in self._live
            if (unit := room.in_flight) is not None and not unit.finished
        ]

    @property
    def hosted(self) -> tuple[R, ...]:
        """Every room whose task still runs (left rooms still ending included)."""
        return tuple(self._live)

    # -- the host's task -------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await self._closing.wait()
                self._nursery = None  # no new rooms from here on
                await self._shut_down()
            except BaseException:
                # Cancelled from outside (the owner's scope, a caller's deadline): the
                # rooms are cancelled with this task, so record it on every unit first —
                # a shielded remote start then gets the stop grace, not forever.
                self._nursery = None
                self.end_all(AbortKind.SHUTDOWN, "cancelled from outside")
                raise
            nursery.cancel_scope.cancel(reason="the rooms host closed")

    async def _shut_down(self) -> None:
        grace = 0.0 if self._hard else self._shutdown_grace
        for room in self._live:
            room.drain()
        waited = self._say_waiting(grace)
        began = trio.current_time()
        with trio.move_on_after(grace):
            await self._until(lambda: not self._live or self._hard)
        if waited and not self._live and not self._hard:
            log.warning(
                "stopping: the running %s(s) finished after %.1fs of the %gs grace: "
                "stopped gracefully",
                self._unit,
                trio.current_time() - began,
                grace,
            )
        running = [
            (room, unit)
            for room in self._live
            if (unit := room.in_flight) is not None and not unit.finished
        ]
        journal = self._journal
        journal.cancelled.extend((room.id, unit.control.message_id) for room, unit in running)
        if self._live and not self._hard and (grace > 0 or running):
            # (a host with no grace of its own: its idle rooms end now, unsaid)
            log.warning(
                "stopping with %d room(s) still busy after %.1fs (%d running): cancelling them",
                len(self._live),
                grace,
                len(running),
            )
        self.end_all(AbortKind.SHUTDOWN, "stopping: the shutdown grace is over")
        cleanup = min(self._policy.cleanup_grace, self.cutoff.at - trio.current_time())
        async with trio.open_nursery() as nursery:
            for _, unit in running:
                nursery.start_soon(unit.wait_settled, max(0.0, cleanup))
        stubborn = [room for room, unit in running if not unit.done.is_set()]
        for room, unit in running:
            if not unit.done.is_set():
                journal.overran.append(
                    Overrun(room.id, unit.control.message_id, "ignored the shutdown")
                )
                log.error(
                    "room %s: %s ignored the shutdown for more than %.1fs",
                    room.id,
                    unit.control.message_id,
                    cleanup,
                )
        # the rest end within their own shielded, bounded cleanup
        await self._until(lambda: all(room in stubborn for room in self._live))
        self.settled.set()

    def _say_waiting(self, grace: float) -> bool:
        """Say what the graceful stop waits for, and for how long (at WARNING: a person
        who pressed Ctrl-C sees it at the default level); whether anything was running.

        Only units still at work are named, at most `_NAMED` of them: an idle agent in
        10,000 rooms stops without a line."""
        if grace <= 0:
            return False
        running = [  # not those the drain aborted (a turn waiting for a person)
            (room.id, unit.control.message_id)
            for room in self._live
            if (unit := room.in_flight) is not None
            and not unit.finished
            and unit.control.aborted_at is None
        ]
        if not running:
            return False
        named = ", ".join(f"room {room}: {message}" for room, message in running[:_NAMED])
        more = f" and {len(running) - _NAMED} more" if len(running) > _NAMED else ""
        log.warning(
            "stopping: waiting up to %gs (the shutdown grace) for %d running %s(s) to "
            "finish (%s%s); then they are cancelled",
            grace,
            len(running),
            self._unit,
            named,
            more,
        )
        return True

    def _pulse(self) -> None:
        self._ended.set()
        self._ended = trio.Event()

    async def _until(self, predicate: Callable[[], bool]) -> None:
        """Wait until `predicate()` holds, re-checked each time a room task ends."""
        while not predicate():
            await self._ended.wait()

    async def _host(self, room: R, scope: trio.CancelScope) -> None:
        policy = self._policy
        try:
            with scope:
                delay = policy.room_restart_base
                while True:
                    try:
                        await room.run()
                        return
                    except Exception:
                        log.exception(
                            "room %s: the room loop crashed; restarting it in %.1fs",
                            room.id,
                            delay,
                        )
                    await trio.sleep(delay)
                    delay = min(delay * 2, policy.room_restart_cap)
                    room.request_resync()  # catch up on what the crash may have skipped
        finally:
            if self._rooms.get(room.id) is room:
                del self._rooms[room.id]
                self._changes.notify()
            # a newer room of the same id keeps the topics. Once the host is shutting
            # down, the owner closes the socket next, and that leaves every topic of the
            # connection at once: no leave per topic then, and an idle room with no hook
            # to call has nothing to close
            leave = not self._closing.is_set()
            if room.id not in self._rooms and room.close_needed(leave=leave):
                # each part bounded inside; all of it by the cutoff (a hard stop)
                with self.cutoff.shield(policy.cleanup_grace + policy.hook_deadline):
                    await room.close(leave=leave)
            del self._live[room]
            self._pulse()
            self._changes.notify()


class Rooms(RoomHost[Room]):
    """The agent's rooms: a `Room` per id, each with the ledger the agent keeps for it."""

    def __init__(
        self,
        context: RoomContext,
        ledgers: dict[str, Ledger],
        *,
        shutdown_grace: float | None = None,
        what: str = "room",
    ) -> None:
        super().__init__(
            self._room,
            policy=context.policy,
            changes=context.changes,
            journal=context.journal,
            cutoff=context.cutoff,
            shutdown_grace=(
                context.policy.shutdown_grace if shutdown_grace is None else shutdown_grace
            ),
            what=what,
            unit=context.rules.work,
        )
        self._context = context
        self._ledgers = ledgers
        """Per room id, kept by the agent across rooms and runs: the adapter never runs
        twice for a message in one process, even if the room is left and rejoined."""

    def _room(self, room_id: str, *, once: bool = False) -> Room:
        ledger = self._ledgers.get(room_id)
        if ledger is None:
            policy = self._context.policy
            ledger = self._ledgers[room_id] = Ledger(
                max_attempts=policy.max_attempts, memory=policy.completed_memory
            )
        return Room(room_id, self._context, ledger, once=once)

    def depart(self, event: str, payload: object, room_id: str) -> None:
        """Pass on the event of a room already left (`room_removed`, `room_deleted`),
        where the rules pass events: a room of its own that runs that one unit."""
        room = self._room(room_id, once=True)
        room.offer_event(event, payload)
        self.adopt(room, f"{self._what} departure")

    @property
    def idle(self) -> bool:
        """No room has a unit running or queued, or a catch-up under way or due."""
        return all(room.idle for room in self.hosted)
