"""An adapter for the process tests: asks unless `ASKING_ADAPTER_QUIET` is set (a
replay that does not ask again), then says what it was told. With
`ASKING_ADAPTER_TAKE` set it first waits for guidance and takes it."""

from __future__ import annotations

import os

from band_trio import Adapter, Turn


class Asking(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        if os.environ.get("ASKING_ADAPTER_QUIET"):
            await turn.reply(f"went ahead: {turn.message.content}")
            return
        if os.environ.get("ASKING_ADAPTER_TAKE"):
            await turn.next_guidance()
        told = await turn.ask("Go ahead?")
        await turn.reply(f"{told}: {turn.message.content}")


def asking() -> Asking:
    return Asking()
