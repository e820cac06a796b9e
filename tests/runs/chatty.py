"""An adapter that says a lot, then works until stopped: for `band-trio runs-api
--adapter chatty:adapter` in tests/runs/test_runs_bounds.py (an event log far larger
than a socket's buffers) and benchmarks/stream_memory.py. `CHATTY_EVENTS` events of
64 KiB each (160 by default: 10 MiB)."""

from __future__ import annotations

import os

import trio

from band_trio.contract import Adapter, Turn

PIECE = "x" * 65_536


class Chatty(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        for _ in range(int(os.environ.get("CHATTY_EVENTS", "160"))):
            await turn.send_event(PIECE, message_type="status")
        await turn.send_event("said it all", message_type="status")
        await trio.sleep_forever()  # until the run is stopped


def adapter() -> Chatty:
    return Chatty()
