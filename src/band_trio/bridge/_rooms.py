"""The rooms of one bridged identity: the runtime's rooms, with the bridge's rules.

A bridged identity's rooms are the runtime's (`runtime.Rooms` of `Room`s): the
catch-up through `/next` and its walk past a stuck head, the claim window, the
queue's overflow, stop, play, the leave, the shutdown and the hard stop are the
agent's, built and tested once. Its `RoomRules` say where it differs:

* `events`: room and participant events are units too, in order with the
  messages; a `room_removed` is forwarded after the room has gone, as a room
  task of its own (`Rooms.depart`);
* `claims`: with `settle = "target"` the far end (a `band-trio host`) claims
  and marks, not the room;
* `work = "forward"`: each unit's call is a forward (`_forward.Forwarder`).

This module only builds them: the context every room of the identity shares.
"""

from __future__ import annotations

from ..contract import Adapter, Cutoff, Threads, Turn
from ..link import RestClient
from ..policy import BusyPolicy, Policy
from ..runtime.parts import (
    Changes,
    Journal,
    Ledger,
    RemoteStopLog,
    RoomContext,
    RoomCounts,
    RoomRules,
    Rooms,
)
from ._forward import Forwarder
from ._policy import BridgePolicy
from ._targets import Target

__all__ = ["forward_rooms"]


class _TargetHooks(Adapter):
    """The rooms' adapter: only its `on_room_left` is called (the target drops what it
    kept for the room: the A2A target's context); a unit's work is the forward."""

    def __init__(self, target: Target) -> None:
        self._target = target

    async def on_turn(self, turn: Turn) -> None:
        raise AssertionError("a bridged identity's units are forwards (RoomContext.call)")

    async def on_room_left(self, room_id: str) -> None:
        await self._target.room_left(room_id)


def forward_rooms(
    forwarder: Forwarder,
    target: Target,
    *,
    agent_id: str,
    rest: RestClient,
    policy: Policy,
    bridge_policy: BridgePolicy,
    settles: bool,
    changes: Changes,
    journal: Journal,
    stops: RemoteStopLog,
    threads: Threads,
    cutoff: Cutoff,
    counts: RoomCounts,
    ledgers: dict[str, Ledger],
) -> Rooms:
    """The rooms host of one identity, every room forwarding through `forwarder`."""
    context = RoomContext(
        agent_id=agent_id,
        rest=rest,
        adapter=_TargetHooks(target),
        policy=policy.replace(room_inbox=bridge_policy.room_queue),
        busy=BusyPolicy(),
        changes=changes,
        journal=journal,
        stops=stops,
        threads=threads,
        cutoff=cutoff,
        rules=RoomRules(claims=settles, events=True, work="forward"),
        call=forwarder,
        counts=counts,
    )
    return Rooms(context, ledgers, shutdown_grace=bridge_policy.shutdown_grace,
                 what="bridge room")  # fmt: skip
