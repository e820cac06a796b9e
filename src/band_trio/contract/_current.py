"""The turn the running code belongs to, for calls that take no turn argument.

`run_asyncio(async_fn, *args)` is called without its turn, the way an adapter calls
any other library, so the turn must be found from where the call is made: the
owner of the turn (the runtime's room, the runs API, the host, the conformance
kit's agent) sets it around `Adapter.on_turn`, in a context variable, and every
task the adapter starts from there inherits it (trio copies the context into a
nursery's child tasks).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import NoTurnError
from ._turn import Turn

__all__ = ["current_turn", "turn_context"]

_CURRENT: contextvars.ContextVar[Turn | None] = contextvars.ContextVar(
    "band_trio_current_turn", default=None
)


def current_turn() -> Turn:
    """The turn whose `on_turn` (or a task it started) is running; `NoTurnError` outside
    one."""
    turn = _CURRENT.get()
    if turn is None:
        raise NoTurnError(
            "no turn is running here: call this from an adapter's on_turn (or a task it "
            "started); an owner of turns sets the turn with contract.turn_context(turn)"
        )
    return turn


@contextmanager
def turn_context(turn: Turn) -> Iterator[Turn]:
    """Make `turn` the current one for the block: what an owner of turns wraps its
    `Adapter.on_turn` call in (a test that calls `on_turn` itself does too)."""
    token = _CURRENT.set(turn)
    try:
        yield turn
    finally:
        _CURRENT.reset(token)
