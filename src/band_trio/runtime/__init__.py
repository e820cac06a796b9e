"""The runtime: the Agent → Rooms → Room → Turn tree that drives an adapter."""

from __future__ import annotations

from ._agent import Agent as Agent
from ._agent import StopResult as StopResult
from ._control import ControlLane as ControlLane
from ._room import Overrun as Overrun
from ._room import Room as Room
from ._turn import AbortKind as AbortKind

__all__ = ["AbortKind", "Agent", "ControlLane", "Overrun", "Room", "StopResult"]
