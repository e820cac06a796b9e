"""The band-trio agent under test, run as the real command:

    band-trio agent --adapter band_trio.bench._trio_subject:adapter


It is the real `band-trio agent` command with an adapter that does what the
driver's message says (`_protocol`) and stamps what happens to it. The
band-sdk subject (`_sdk_subject`) does the same things the way a careful
band-sdk adapter author would, so the two differ only in their runtimes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import trio

from ..adapters import (
    A2AAdapter,
    AcpAdapter,
    AcpAgent,
    AcpConfig,
    CopilotAdapter,
    CopilotCli,
    CopilotConfig,
    OpenAIChatAdapter,
)
from ..contract import Adapter, Turn, run_command
from ._opencode_home import opencode_home
from ._protocol import (
    A2A,
    ACP,
    ANTHROPIC,
    ASK,
    BUSY,
    CMD,
    COPILOT,
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
    for that peer (one per URL), which owns the remote work and its stop.

    With `BAND_COPILOT_CLI` set (the driver passes it when the CLI is installed), one
    Copilot CLI is owned for the run, started at the first `bench copilot` message so
    that the other scenarios share no core with it; each model server URL gets its own
    adapter (its sessions name the provider), all on that one process.

    With `BAND_OPENCODE_BIN` set likewise, one `opencode acp` is owned for the run,
    started at the first `bench acp` message, whose model server it is given (the ACP
    row has one)."""

    def __init__(self) -> None:
        self._remotes: dict[tuple[str, str], Adapter] = {}
        cli = os.environ.get("BAND_COPILOT_CLI")
        self._copilot = None if not cli else CopilotCli(_copilot_config(cli, _UNUSED_URL))
        opencode = os.environ.get("BAND_OPENCODE_BIN")
        self._opencode = None if not opencode else _OpenCode(opencode)

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for child in (self._copilot, self._opencode):
                if child is not None:
                    await stack.enter_async_context(child.running(eager=False))
            yield

    @property
    def resident_tasks(self) -> int:
        """The tasks of the processes owned for the run (left out of a leak count)."""
        return sum(child.tasks for child in (self._copilot, self._opencode) if child is not None)

    def _remote(self, kind: str, url: str) -> Adapter:
        key = (kind, url)
        if key not in self._remotes:
            if kind == ACP:
                assert self._opencode is not None, "the driver passed no BAND_OPENCODE_BIN"
                self._opencode.serve(url)
                self._remotes[key] = AcpAdapter(self._opencode.config, agent=self._opencode)
            elif kind == COPILOT:
                assert self._copilot is not None, "the driver passed no BAND_COPILOT_CLI"
                config = _copilot_config(self._copilot.config.cli, url)
                self._remotes[key] = CopilotAdapter(config, cli=self._copilot)
            elif kind == LLM:
                self._remotes[key] = OpenAIChatAdapter(url, "gpt-4o")
            elif kind == ANTHROPIC:  # imported when asked for: the SDK is an extra
                from ..adapters import AnthropicAdapter

                self._remotes[key] = AnthropicAdapter(url, "claude-sonnet-4-6", api_key="sk-bench")
            else:
                self._remotes[key] = A2AAdapter(url)
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
            elif command.kind == ASK:  # its `except Cancelled` below: the wait ended
                await turn.ask("bench: may I go ahead?")
            elif command.kind == BUSY:
                await trio.sleep_until(_until(command.argument))
            elif command.kind == TASKS:  # the CLI's and OpenCode's, owned for the run: out
                observe("tasks", message.id, live_tasks() - self.resident_tasks)
            elif command.kind == CMD:
                await run_command(turn, command_script(command.argument))
            elif command.kind in (LLM, A2A, COPILOT, ANTHROPIC, ACP):
                url, _ = command.split()
                await self._remote(command.kind, url).on_turn(turn)
                observe("done", message.id)
                return
        except trio.Cancelled:
            observe("cancel", message.id)
            raise
        observe("done", message.id)
        await turn.reply("ok")


_UNUSED_URL = "http://127.0.0.1:9/v1"
"""The CLI's own provider setting (offline mode wants one when it starts); each session
names the real one, which wins."""


def _copilot_config(cli: str, base_url: str) -> CopilotConfig:
    return CopilotConfig(cli=cli, model="gpt-4o", base_url=base_url, api_key="sk-bench")


class _OpenCode(AcpAgent):
    """`opencode acp --pure` in an isolated, offline home of its own (`_opencode_home`),
    its model server the one the first `bench acp` message names; the home is removed
    when the run ends."""

    def __init__(self, binary: str) -> None:
        self._root = Path(tempfile.mkdtemp(prefix="band-trio-bench-acp-"))
        (self._root / "project").mkdir()
        config = AcpConfig(
            command=(binary, "acp", "--pure"), working_directory=str(self._root / "project")
        )
        super().__init__(config)
        self.base_url = ""
        self._env: dict[str, str] = {}

    def serve(self, base_url: str) -> None:
        """Use `base_url` as the model server (the first one named; one per run)."""
        if self.base_url and self.base_url != base_url:
            raise RuntimeError(f"opencode acp serves {self.base_url} for this run")
        self.base_url = base_url

    def prepare(self) -> None:
        if not self._env:
            self._env = opencode_home(self._root, self.base_url, "gpt-4o")

    def environment(self) -> dict[str, str]:
        return dict(self._env)

    def cleanup(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


def _until(argument: str) -> float:
    """A `perf_counter` instant as a trio clock deadline (both are CLOCK_MONOTONIC
    based, but trio's clock has its own offset)."""
    return trio.current_time() + max(0.0, float(argument) - time.perf_counter())


def adapter() -> BenchAdapter:
    exit_with_driver()
    return BenchAdapter()
