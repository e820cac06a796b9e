"""An adapter that ignores the stop (a shielded wait), for `band-trio runs-api
--adapter stubborn:adapter` in tests/runs/test_cli.py. Its wait is bounded (60 s),
so even a process that is not killed ends."""

from __future__ import annotations

import trio

from band_trio.contract import Adapter, Turn


class Stubborn(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep(60)


def adapter() -> Stubborn:
    return Stubborn()
