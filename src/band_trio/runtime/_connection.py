"""One connection's share of the work: routing its pushes, and joining rooms on it.

Every join, rejoin and resync for a connection runs in that connection's
nursery (`Connection.work`), which the link cancels when the socket closes:
nothing keeps trying a dead socket, and the next connection starts afresh.
A room's join is retried for that room alone, on this connection; a room
refused too often is given up (left, with a log line) without touching the
connection or the other rooms. At most `Policy.join_window` rooms join at once
(a room holds its place for its two topics' joins, not for the wait before a
retry): the set-up of an agent in 10,000 rooms puts no more than that on the
wire, so a platform that queues its replies by count never sees a burst. The
joins are sent and answered by one task (`_joins.Joiner`), not a task per room.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from .. import errors
from ..link import Socket
from ..policy import Policy
from ..wire import AgentControl, MessageCreated, RoomAdded, RoomDeleted, RoomRemoved, Supersede
from ._control import ControlLane
from ._hosting import LinkedRoom, LinkedRooms
from ._inbound import inbound
from ._joins import Joiner

__all__ = ["Connection"]

log = logging.getLogger("band_trio.runtime.link")


class Connection:
    """Routes one socket's pushes and joins rooms on it. Made by the link per socket."""

    def __init__(
        self,
        *,
        agent_id: str,
        rooms: LinkedRooms,
        control: ControlLane,
        policy: Policy,
        tap: Callable[[str, str, Any], None] | None = None,
    ) -> None:
        self._agent_id = agent_id
        self._tap = tap
        self._rooms = rooms
        self._control = control
        self._policy = policy
        self.socket: Socket | None = None
        self.work: trio.Nursery | None = None
        """The connection's nursery, cancelled when the socket closes (set by the link)."""
        self.live = True
        """False once the link has moved on: a late push from this socket is dropped."""
        self.terminal: errors.DisconnectReason | None = None
        """Set by a `supersede` that is not retryable."""
        self.superseded = False
        """A `supersede` came (retryable or not): why this connection ends."""
        self.ready = False
        """The link finished setting this connection up (its rooms joined)."""
        self.joined = 0
        """Rooms joined on this connection."""
        self.joiner: Joiner | None = None
        """Every room join on this connection, from one task (set by `start_joins`)."""

    # -- joins -----------------------------------------------------------------

    async def join_agent_topics(self, socket: Socket) -> None:
        await socket.join(f"agent_control:{self._agent_id}")
        await socket.join(f"agent_rooms:{self._agent_id}")

    def start_joins(self, socket: Socket, work: trio.Nursery) -> Joiner:
        """Start the connection's joiner in its work nursery (it ends with the socket)."""
        self.joiner = Joiner(socket, rooms=self._rooms, policy=self._policy, on_joined=self._joined)
        work.start_soon(self.joiner.run, name="room joins")
        return self.joiner

    def _joined(self, room: LinkedRoom) -> None:
        socket = self.socket
        assert socket is not None
        self.joined += 1
        # one line for the set-up's joins together (the link's), one for a later one
        log.log(logging.INFO if self.ready else logging.DEBUG, "room %s: joined", room.id)
        room.joined(socket)

    # -- pushes (called by the socket's reader: never awaits) -----------------

    def on_push(self, topic: str, event: str, payload: Any) -> None:
        """Route one push, then show it to the tap (if any)."""
        if not self.live:
            log.debug("dropped %s from an older connection", event)
            return
        self._route(topic, event, payload)
        if self._tap is not None:
            self._tap(topic, event, payload)

    def _route(self, topic: str, event: str, payload: Any) -> None:
        if isinstance(payload, MessageCreated):
            if event != "message_created":
                return
            room_id = topic.partition(":")[2]
            room = self._rooms.get(room_id)
            if room is not None:
                room.push(inbound(room_id, self._agent_id, payload))
        elif isinstance(payload, AgentControl):
            self._control.apply(payload, self._rooms.current)
        elif isinstance(payload, RoomAdded) and not isinstance(payload, RoomRemoved):
            added = self._rooms.add(payload.id)
            if added is not None and self.joiner is not None:
                self.joiner.add(added)
        elif isinstance(payload, RoomRemoved | RoomDeleted):
            why = "removed from the room" if isinstance(payload, RoomRemoved) else "room deleted"
            self._rooms.remove(payload.id, why)
        elif isinstance(payload, Supersede):
            self._on_supersede(payload)
        else:
            log.debug("ignored %s on %s", event, topic)

    def _on_supersede(self, payload: Supersede) -> None:
        log.warning("superseded by the platform: %s (%s)", payload.reason, payload.message)
        self.superseded = True
        if not payload.retryable:
            self.terminal = errors.DisconnectReason(
                reason=payload.reason,
                message=payload.message,
                retryable=False,
                retry_after=payload.retry_after,
                correlation_id=payload.correlation_id,
            )
            if self.socket is not None:
                self.socket.close_soon()
