"""The rooms host: one task per room, in a nursery it owns, across connections.

    Rooms.run (nursery)
    └── room <id>               one task per room: the room loop, restarted with
                                backoff if it crashes; then its topics are left

Rooms outlive connections (a room keeps working over REST while the socket is
down); the link only tells each room which connection its topics are joined
on. Leaving a room (a `room_removed` push, a refused join, a room gone from
the list) is the host cancelling that room's task.

Shutdown is the host's own, in order, when the agent asks for it (`close`):
every room drains (finishes the unit in hand, mark included, then ends its
loop) for up to the shutdown grace; then the rooms still running are
cancelled — their turns are shutdown-cancelled, messages left `processing` —
and get their bounded cleanup. `settled` is set once every room has ended,
except rooms whose adapter ignores the cancel: those are reported as overrun
and still owned (the agent's `run()` returns only once they end).
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable, Iterable, Mapping

import trio

from ._context import RoomContext
from ._ledger import Ledger
from ._results import Overrun
from ._room import Room
from ._turn_state import AbortKind

__all__ = ["Rooms"]

log = logging.getLogger("band_trio.runtime.rooms")


class Rooms:
    """Every room the agent is in, each running as a task of the host's nursery."""

    def __init__(self, context: RoomContext, ledgers: dict[str, Ledger]) -> None:
        self._ctx = context
        self._ledgers = ledgers
        """Per room id, kept by the agent across rooms and runs: the adapter never runs
        twice for a message in one process, even if the room is left and rejoined."""
        self._rooms: dict[str, Room] = {}
        self.current: Mapping[str, Room] = types.MappingProxyType(self._rooms)
        """The rooms by id, read-only (a room leaves it as soon as it is left)."""
        self._live: dict[Room, trio.CancelScope] = {}
        """Room tasks still running, with the scope that ends each."""
        self._nursery: trio.Nursery | None = None
        self._ended = trio.Event()
        self._closing = trio.Event()
        self.settled = trio.Event()
        """Set once a requested shutdown is over (see the module docstring)."""

    # -- synchronous: the link (pushes, the room list) and the agent ----------

    def get(self, room_id: str) -> Room | None:
        return self._rooms.get(room_id)

    def add(self, room_id: str) -> Room | None:
        """Start serving `room_id`; None if it is served already or the host is closing."""
        if room_id in self._rooms or self._nursery is None:
            return None
        ledger = self._ledgers.get(room_id)
        if ledger is None:
            policy = self._ctx.policy
            ledger = self._ledgers[room_id] = Ledger(
                max_attempts=policy.max_attempts, memory=policy.completed_memory
            )
        room = Room(room_id, self._ctx, ledger)
        scope = trio.CancelScope()
        self._rooms[room_id] = room
        self._live[room] = scope
        self._nursery.start_soon(self._host, room, scope, name=f"room {room_id}")
        self._ctx.changes.notify()
        return room

    def remove(self, room_id: str, why: str) -> None:
        """Leave `room_id`: its running turn is cancelled (not an interrupt)."""
        room = self._rooms.pop(room_id, None)
        if room is None:
            return
        log.info("left room %s: %s", room_id, why)
        room.ending(AbortKind.LEFT, why)
        self._live[room].cancel(reason=why)
        self._ctx.changes.notify()

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
        """Cancel every room task now (its running turn aborted with `kind`)."""
        for room, scope in self._live.items():
            room.ending(kind, reason)
            scope.cancel(reason=reason)

    def running_turns(self) -> list[tuple[str, str]]:
        """(room, message) of every turn whose adapter is still at work."""
        return [
            (room.id, room.turn.message.id)
            for room in self._live
            if room.turn is not None and not room.turn.finished
        ]

    # -- the host's task -------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await self._closing.wait()
            self._nursery = None  # no new rooms from here on
            await self._shut_down()
            nursery.cancel_scope.cancel(reason="agent stopped")

    async def _shut_down(self) -> None:
        policy = self._ctx.policy
        for room in self._live:
            room.drain()
        with trio.move_on_after(policy.shutdown_grace):
            await self._until(lambda: not self._live)
        running = [
            (room, room.turn)
            for room in self._live
            if room.turn is not None and not room.turn.finished
        ]
        journal = self._ctx.journal
        journal.cancelled.extend((room.id, turn.message.id) for room, turn in running)
        if self._live:
            log.warning(
                "stopping with %d room(s) still busy after %.1fs (%d turn(s) running): "
                "cancelling them",
                len(self._live),
                policy.shutdown_grace,
                len(running),
            )
        self.end_all(AbortKind.SHUTDOWN, "agent stopping: the shutdown grace is over")
        async with trio.open_nursery() as nursery:
            for _, turn in running:
                nursery.start_soon(turn.wait_settled, policy.cleanup_grace)
        stubborn = [room for room, turn in running if not turn.done.is_set()]
        for room, turn in running:
            if not turn.done.is_set():
                journal.overran.append(Overrun(room.id, turn.message.id, "ignored the shutdown"))
                log.error(
                    "room %s: the turn for %s ignored the shutdown for more than %.1fs",
                    room.id,
                    turn.message.id,
                    policy.cleanup_grace,
                )
        # the rest end within their own shielded, bounded cleanup
        await self._until(lambda: all(room in stubborn for room in self._live))
        self.settled.set()

    async def _until(self, predicate: Callable[[], bool]) -> None:
        """Wait until `predicate()` holds, re-checked each time a room task ends."""
        while not predicate():
            await self._ended.wait()

    async def _host(self, room: Room, scope: trio.CancelScope) -> None:
        policy = self._ctx.policy
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
                self._ctx.changes.notify()
            if room.id not in self._rooms:  # a newer room of the same id keeps the topics
                with trio.CancelScope(shield=True):  # each part bounded inside
                    await room.close()
            del self._live[room]
            self._ended.set()
            self._ended = trio.Event()
            self._ctx.changes.notify()
