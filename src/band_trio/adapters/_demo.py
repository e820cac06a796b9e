"""The demo adapter: echoes, after an optional pretend reasoning cycle.

`sleep=<seconds>` anywhere in the text makes it wait that long first, which is
what the demo and the tests use as a stand-in for a long, cancellable turn.
"""

from __future__ import annotations

import re

import trio

from ..contract import Adapter, Turn

__all__ = ["DemoAdapter", "demo"]

_SLEEP = re.compile(r"sleep=(\d+(?:\.\d+)?)")


class DemoAdapter(Adapter):
    """Replies `echo: <text>`; `sleep=<seconds>` in the text delays the reply."""

    async def on_turn(self, turn: Turn) -> None:
        match = _SLEEP.search(turn.message.content)
        if match:
            await trio.sleep(float(match.group(1)))
        await turn.reply(f"echo: {turn.message.content}")


def demo() -> DemoAdapter:
    """The demo adapter (for `--adapter band_trio.adapters:demo`)."""
    return DemoAdapter()
