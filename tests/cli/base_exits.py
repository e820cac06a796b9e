"""Adapters whose code raises a `BaseException` that is not a cancel, for the commands'
tests (`--adapter base_exits:raises`, run with this folder as the cwd).

`raises`: a message naming one of `SystemExit`, `KeyboardInterrupt`,
`GeneratorExit` makes the turn raise it (`sys.exit(3)` for the first); any other
is echoed, so a test can show that the process went on after each failed turn.
`always`: every turn raises, the next of the three each time (the conformance
kit's probes see each of them). `stuck` and `stuck_with_child` never let the cancel
in, the second while a command it started runs.
"""

from __future__ import annotations

import itertools

import trio

from band_trio import Adapter, Turn
from band_trio.contract import run_command

RAISED: dict[str, type[BaseException]] = {
    "SystemExit": SystemExit,
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
}


def _make(name: str) -> BaseException:
    return SystemExit(3) if name == "SystemExit" else RAISED[name]()


class Raises(Adapter):
    async def on_turn(self, turn: Turn) -> None:
        for name in RAISED:
            if name in turn.message.content:
                raise _make(name)
        await turn.reply(f"echo: {turn.message.content}")


class Always(Adapter):
    def __init__(self) -> None:
        self._next = itertools.cycle(RAISED)

    async def on_turn(self, turn: Turn) -> None:
        raise _make(next(self._next))


def raises() -> Adapter:
    return Raises()


def always() -> Adapter:
    return Always()


class Stuck(Adapter):
    """Never lets the cancel in (a shielded wait): only the process's exit ends it."""

    async def on_turn(self, turn: Turn) -> None:
        with trio.CancelScope(shield=True):
            print("stuck", flush=True)  # for the test: the cancel cannot reach it now
            await trio.sleep_forever()


def stuck() -> Adapter:
    return Stuck()


class StuckWithChild(Adapter):
    """Runs a command (its pid written to `$BAND_TEST_PIDS`) and never lets the cancel
    reach it: the process exits without the turn, and must not leave the command."""

    async def on_turn(self, turn: Turn) -> None:
        with trio.CancelScope(shield=True):
            script = 'echo $$ >> "$BAND_TEST_PIDS"; exec sleep 600'  # a named pipe
            await run_command(turn, ["sh", "-c", script])


def stuck_with_child() -> Adapter:
    return StuckWithChild()
