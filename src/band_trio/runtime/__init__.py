"""The runtime: the Agent → Rooms → Room → Turn tree that drives an adapter.

Only what a user of an agent needs is public here: the `Agent`, what its
`stop()` returns, the read-only `RoomView` of `Agent.rooms`, and `AbortKind`.
How the tree is built lives in the private modules, one piece each:
`_agent` (the lifecycle), `_link_supervisor` and `_connection` (the link supervisor),
`_rooms` (the rooms host), `_room` (the room loop), `_turn` (claim → run →
settle), `_settle` (the marks), `_control` (signals).
"""

from __future__ import annotations

from ._agent import Agent as Agent
from ._control import SignalCounts as SignalCounts
from ._results import Overrun as Overrun
from ._results import StopResult as StopResult
from ._results import UnsettledMark as UnsettledMark
from ._stops import RemoteStopStats as RemoteStopStats
from ._turn_state import AbortKind as AbortKind
from ._view import RoomView as RoomView

__all__ = [
    "AbortKind",
    "Agent",
    "Overrun",
    "RemoteStopStats",
    "RoomView",
    "SignalCounts",
    "StopResult",
    "UnsettledMark",
]
