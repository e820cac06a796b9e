"""The runtime's parts that another layer of band-trio builds on: the bridge and its host.

Internal to band-trio: a named API for its other packages, with no promise of
compatibility and not for agent authors (they use `Agent`, `band_trio.runtime`).
It is how the bridge runs the runtime instead of copying it:

* The link supervisor (`Link`): the key check, one connection at a time with
  backoff, room joins with retries, the room list read page by page, the
  terminal-disconnect reasons, and the control lane's routing and dedup. It
  drives any rooms that satisfy `LinkedRooms`/`LinkedRoom`, and shows every
  push to an optional tap.
* The rooms (`Rooms`, `Room`) and their host (`RoomHost`): one task per room,
  the catch-up, the claim window, stop, play, the leave, the shutdown and the
  hard stop; where a bridged identity's rooms differ, `RoomRules` says so, and
  `RoomContext.call` is a unit's work (a forward) in place of the adapter's.
* One turn's claim → run → settle (`run_turn`), for a host that receives a
  message some other way than the socket; the port its posts go through
  (`PlatformPort`).
"""

from __future__ import annotations

from ._context import Changes as Changes
from ._context import Journal as Journal
from ._context import RoomContext as RoomContext
from ._context import RoomCounts as RoomCounts
from ._context import RoomRules as RoomRules
from ._control import ControlLane as ControlLane
from ._hosting import HostedRoom as HostedRoom
from ._hosting import InFlight as InFlight
from ._hosting import LinkedRoom as LinkedRoom
from ._hosting import LinkedRooms as LinkedRooms
from ._inbound import MESSAGE as MESSAGE
from ._inbound import Inbound as Inbound
from ._inbound import inbound as inbound
from ._leaving import chat_topic as chat_topic
from ._leaving import leave_topics as leave_topics
from ._leaving import participants_topic as participants_topic
from ._leaving import tell_left as tell_left
from ._ledger import Ledger as Ledger
from ._ledger import OwnPosts as OwnPosts
from ._ledger import Standing as Standing
from ._link_supervisor import Link as Link
from ._link_supervisor import LinkEnd as LinkEnd
from ._link_supervisor import LinkSettings as LinkSettings
from ._pages import Pages as Pages
from ._port import PlatformPort as PlatformPort
from ._room import Room as Room
from ._rooms import RoomHost as RoomHost
from ._rooms import Rooms as Rooms
from ._settle import Outcome as Outcome
from ._settle import settle as settle
from ._stops import RemoteStopLog as RemoteStopLog
from ._turn import run_turn as run_turn
from ._turn_state import AbortKind as AbortKind
from ._turn_state import ActiveTurn as ActiveTurn
from ._turn_state import wait_settled as wait_settled

__all__ = [
    "MESSAGE",
    "AbortKind",
    "ActiveTurn",
    "Changes",
    "ControlLane",
    "HostedRoom",
    "InFlight",
    "Inbound",
    "Journal",
    "Ledger",
    "Link",
    "LinkEnd",
    "LinkSettings",
    "LinkedRoom",
    "LinkedRooms",
    "Outcome",
    "OwnPosts",
    "Pages",
    "PlatformPort",
    "RemoteStopLog",
    "Room",
    "RoomContext",
    "RoomCounts",
    "RoomHost",
    "RoomRules",
    "Rooms",
    "Standing",
    "chat_topic",
    "inbound",
    "leave_topics",
    "participants_topic",
    "run_turn",
    "settle",
    "tell_left",
    "wait_settled",
]
