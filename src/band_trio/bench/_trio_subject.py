"""The band-trio agent under test, run as the real command:

    band-trio agent --adapter band_trio.bench._trio_subject:adapter


It is the real `band-trio agent` command with an adapter that does what the
driver's message says (`_protocol`) and stamps what happens to it. The
band-sdk subject (`_sdk_subject`) does the same things the way a careful
band-sdk adapter author would, so the two differ only in their runtimes.
"""

from __future__ import annotations

import time

import trio

from ..adapters import A2AAdapter, OpenAIChatAdapter
from ..contract import Adapter, Turn, run_command
from ._protocol import (
    A2A,
    BUSY,
    CMD,
    HOLD,
    LLM,
    TASKS,
    command_script,
    exit_with_driver,
    observe,
    parse_command,
)

__all__ = ["BenchAdapter", "adapter", "live_tasks"]


def live_tasks() -> int:
    """Every task in this trio run, system tasks included."""
    root = trio.lowlevel.current_root_task()
    stack = [root] if root is not None else []
    count = 0
    while stack:
        task = stack.pop()
        count += 1
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return count


class BenchAdapter(Adapter):
    """Does what the message says; a remote command is handed to the reference adapter
    for that peer (one per URL), which owns the remote work and its stop."""

    def __init__(self) -> None:
        self._remotes: dict[tuple[str, str], Adapter] = {}

    def _remote(self, kind: str, url: str) -> Adapter:
        key = (kind, url)
        if key not in self._remotes:
            self._remotes[key] = (
                OpenAIChatAdapter(url, "gpt-4o") if kind == LLM else A2AAdapter(url)
            )
        return self._remotes[key]

    async def on_turn(self, turn: Turn) -> None:
        message = turn.message
        command = parse_command(message.content)
        if command is None:
            await turn.reply("ok")
            return
        observe("enter", message.id)
        try:
            if command.kind == HOLD:
                await trio.sleep_forever()
            elif command.kind == BUSY:
                await trio.sleep_until(_until(command.argument))
            elif command.kind == TASKS:
                observe("tasks", message.id, live_tasks())
            elif command.kind == CMD:
                await run_command(turn, command_script(command.argument))
            elif command.kind in (LLM, A2A):
                url, _ = command.split()
                await self._remote(command.kind, url).on_turn(turn)
                observe("done", message.id)
                return
        except trio.Cancelled:
            observe("cancel", message.id)
            raise
        observe("done", message.id)
        await turn.reply("ok")


def _until(argument: str) -> float:
    """A `perf_counter` instant as a trio clock deadline (both are CLOCK_MONOTONIC
    based, but trio's clock has its own offset)."""
    return trio.current_time() + max(0.0, float(argument) - time.perf_counter())


def adapter() -> BenchAdapter:
    exit_with_driver()
    return BenchAdapter()
