"""An adapter that ignores the stop (a shielded wait), for `band-trio runs-api
--adapter stubborn:adapter` in tests/runs/test_cli.py. Its wait is bounded (60 s),
so even a process that is not killed ends."""

from __future__ import annotations

import trio

from band_trio.contract import Adapter, Turn, run_command


class Stubborn(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep(60)


def adapter() -> Stubborn:
    return Stubborn()


class StubbornWithChild(Adapter):
    """Runs a command (its pid written to the named pipe `$BAND_TEST_PIDS`) and never
    lets the stop reach it."""

    async def on_turn(self, turn: Turn) -> None:
        with trio.CancelScope(shield=True):
            await run_command(turn, ["sh", "-c", 'echo $$ >> "$BAND_TEST_PIDS"; exec sleep 600'])


def with_child() -> StubbornWithChild:
    return StubbornWithChild()
