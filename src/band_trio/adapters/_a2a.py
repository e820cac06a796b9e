"""(Being written.)"""

from __future__ import annotations

from ..contract import Adapter, Turn

__all__ = ["A2AAdapter", "a2a"]


class A2AAdapter(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        raise NotImplementedError


def a2a() -> A2AAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:a2a`)."""
    raise NotImplementedError
