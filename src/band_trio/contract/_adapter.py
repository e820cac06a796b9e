"""What an adapter implements: one handler per turn, and two optional hooks."""

from __future__ import annotations

import abc

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
      under `Policy.hook_deadline`; an error is logged.
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
