"""(Being written.)"""

from __future__ import annotations

from ..contract import Adapter, Turn

__all__ = ["OpenAIChatAdapter", "openai_chat"]


class OpenAIChatAdapter(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        raise NotImplementedError


def openai_chat() -> OpenAIChatAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:openai_chat`)."""
    raise NotImplementedError
