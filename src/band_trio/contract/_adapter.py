"""What an adapter implements: one handler per turn, and three optional hooks."""

from __future__ import annotations

import abc
import contextlib
from contextlib import AbstractAsyncContextManager

from ._message import AgentInfo
from ._turn import Turn

__all__ = ["Adapter"]


class Adapter(abc.ABC):
    """Subclass this and implement `on_turn`.

    The runtime drives an adapter one turn at a time per room, concurrently
    across rooms, and runs every call in a cancel scope with a deadline from
    the agent's `Policy`:

    * `on_turn` — inside the turn's scope: an interrupt or stop cancels it, and
      `Policy.turn_deadline` (none by default) bounds it;
    * `on_started` — once per run, after the platform confirmed the agent's key
      and before any room is served, under `Policy.hook_deadline`; raising (or
      overrunning) ends `Agent.run()` with `AdapterError`;
    * `on_room_left` — after the agent left a room (or the agent stopped), shielded
      under `Policy.hook_deadline`; an error is logged;
    * `lifespan()` — an async context manager entered once around a whole run of
      whatever drives the adapter (`Agent.run`, the runs API, a bridge host):
      before its first call, left after its last one (`on_room_left` included).
    """

    @abc.abstractmethod
    async def on_turn(self, turn: Turn) -> None:
        """Run one reasoning cycle. Raising marks the message `failed`.

        Let `trio.Cancelled` through (cleanup in `finally` is fine): swallowing it
        does not make an aborted turn a success, and the runtime reports the turn
        as overrunning. Work started elsewhere is registered with `turn.remote`.
        """

    async def on_started(self, agent: AgentInfo) -> None:  # noqa: B027 - optional hook
        """Called once per run of the agent, before any room is served."""

    async def on_room_left(self, room_id: str) -> None:  # noqa: B027 - optional hook
        """Called after the agent left a room: drop what is kept for it."""

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Where an adapter owns what outlives one turn: a process, a pool of connections.

        The driver enters it once per run, before the adapter's first call, and leaves it
        after the last one, so whatever the adapter opens here (a nursery for the tasks
        that serve a child process, say) has an owner that waits for it. Entering should
        not block for long (start slow things in the background and let the first turn
        wait for them); leaving must end what was opened, bounded, also under a cancel.
        The default does nothing."""
        return contextlib.nullcontext()
