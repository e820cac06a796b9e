"""(Being written.)"""

from __future__ import annotations

from ..contract import Adapter, Turn

__all__ = ["CommandAdapter", "command"]


class CommandAdapter(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        raise NotImplementedError


def command() -> CommandAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:command`)."""
    raise NotImplementedError
