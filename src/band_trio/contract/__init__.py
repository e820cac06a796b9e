"""The adapter contract: `Adapter`, the `Turn` it runs, and the `Message` it answers."""

from __future__ import annotations

from ._turn import Adapter as Adapter
from ._turn import Message as Message
from ._turn import Turn as Turn
from ._turn import TurnPort as TurnPort

__all__ = ["Adapter", "Message", "Turn", "TurnPort"]
