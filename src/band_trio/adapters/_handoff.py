"""Tool events from asyncio code to the room, while the code runs.

A framework adapter's graph or agent runs on the asyncio loop's thread
(`run_asyncio`), where nothing of trio may be touched: not the `Turn`, not a
channel. What the room should see while it works (the tool calls it makes, their
results) crosses over the one way trio offers another thread, the run's
`TrioToken.run_sync_soon`, into a bounded channel that the turn's own trio task
drains, posting each as an event. Everything else stays on its side:

    handoff = Handoff(turn)                      # the trio side: the channel, the token
    answer = await handoff.run(work, *args)      # work(*args, handoff) on asyncio
    # in work, on the asyncio thread:  handoff.tool_call(call_id, name, arguments)

Progress is best effort: past `CAPACITY` events waiting to be posted, the rest of a
turn's are dropped (counted, and logged once), never queued without bound, and the
asyncio side never waits for the room. The answer does not go this way: `run`
returns it, and the adapter posts it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import trio

from ..contract import Turn, run_asyncio

__all__ = ["CAPACITY", "Handoff", "ToolEvent"]

log = logging.getLogger("band_trio.adapters")

CAPACITY = 64
"""Tool events a turn holds for posting at most; more are dropped."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A tool call the framework made, or its result: plain data, built on the asyncio
    side and posted on the trio side."""

    kind: Literal["tool_call", "tool_result"]
    call_id: str
    name: str
    text: str
    """The call's arguments (JSON text), or the result."""
    arguments: Any = None
    """The call's arguments, parsed (what the room's event metadata carries)."""


class Handoff:
    """One turn's tool events, from the asyncio thread to the room.

    Built in the turn's trio code. `tool_call` and `tool_result` may be called from any
    thread (they only hand the event to trio's run); the rest is the trio side's."""

    def __init__(self, turn: Turn, *, enabled: bool = True) -> None:
        self._turn = turn
        self._enabled = enabled
        self._token = trio.lowlevel.current_trio_token()
        self._send, self._receive = trio.open_memory_channel[ToolEvent](CAPACITY)
        self.dropped = 0

    # -- the asyncio side (any thread) ------------------------------------------

    def tool_call(self, call_id: str, name: str, arguments: str | Mapping[str, Any]) -> None:
        if isinstance(arguments, str):
            text = arguments
            try:
                parsed: Any = json.loads(arguments or "{}")
            except ValueError:
                parsed = arguments
        else:
            parsed = dict(arguments)
            text = json.dumps(parsed, ensure_ascii=False, default=str)
        self._put(ToolEvent("tool_call", call_id, name, text, parsed))

    def tool_result(self, call_id: str, name: str, result: object) -> None:
        self._put(ToolEvent("tool_result", call_id, name, _text(result)))

    def _put(self, event: ToolEvent) -> None:
        if not self._enabled:
            return
        with contextlib.suppress(trio.RunFinishedError):  # the run is over: nobody to tell
            self._token.run_sync_soon(self._deliver, event)

    # -- the trio side ------------------------------------------------------------

    def _deliver(self, event: ToolEvent) -> None:
        """In trio's thread, from its run_sync_soon queue: must not raise."""
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            if not self.dropped:
                log.warning(
                    "room %s: more than %d tool events waiting to be posted; the rest of "
                    "this turn's are dropped",
                    self._turn.room_id,
                    CAPACITY,
                )
            self.dropped += 1
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass  # the turn is over (or aborted): too late to post

    async def run(self, async_fn: Callable[..., Awaitable[T]], *args: object) -> T:
        """`await async_fn(*args, self)` on the turn's asyncio loop (`run_asyncio`),
        posting its tool events meanwhile; its result once every event handed over
        before it ended was posted. An abort cancels both."""
        if not self._enabled:
            return await run_asyncio(async_fn, *args, self)
        failed: Exception | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._post_all)
            try:
                result = await run_asyncio(async_fn, *args, self)
            except Exception as exc:  # raised as itself below, not in the nursery's group
                failed = exc
            finally:
                # Every event the code handed over came before its end (one queue, in
                # order): closing now lets the poster finish them, then stop.
                self._send.close()
        if failed is not None:
            raise failed
        return result

    async def _post_all(self) -> None:
        async with self._receive:
            async for event in self._receive:
                await self._post(event)

    async def _post(self, event: ToolEvent) -> None:
        metadata: dict[str, Any] = {"tool_call_id": event.call_id, "name": event.name}
        if event.kind == "tool_call":
            metadata["arguments"] = event.arguments
            content = f"{event.name}({event.text})"
        else:
            content = event.text or "(empty)"
        await self._turn.send_event(content, message_type=event.kind, metadata=metadata)


def _text(result: object) -> str:
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except ValueError:
        return str(result)
