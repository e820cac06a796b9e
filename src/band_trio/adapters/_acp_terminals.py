"""The `terminal/*` client capability of the ACP adapter: commands an agent runs through
band-trio, when the operator offers it (`AcpConfig.terminal`).

    terminals = Terminals(config)
    async with terminals.serving():       # the agent's connection owns them
        ...                               # its request handlers call create/output/...

ACP lets an agent run a command on the client's side and read its output
(`terminal/create`, `terminal/output`, `terminal/wait_for_exit`, `terminal/kill`,
`terminal/release`). Each command runs without a shell, in a process group of
its own (`_stdio_process`), in the working directory or a folder inside it
(resolved, symbolic links included), with band-trio's environment less its
`BAND_*` variables plus the variables the agent names, its stdin closed. Its
stdout and stderr go into one buffer that keeps the last `outputByteLimit`
bytes (the config's `max_file_bytes` at most), cut at a character boundary.

The owner drives: the processes' tasks run in `serving()`'s nursery, so when the
agent's connection ends every terminal still running is ended with it (SIGTERM to
its group, SIGKILL after the grace, reaped). `kill` and `release` end one the
same way; at most `MAX_TERMINALS` live at once.
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from ._acp_config import AcpConfig
from ._jsonrpc import RpcFault
from ._stdio_process import ChildProcess, spawn

__all__ = ["MAX_TERMINALS", "Terminals", "confined"]

MAX_TERMINALS = 16
"""Terminals one agent process may hold at once (created and not yet released)."""


def confined(path: Any, root: str) -> str:
    """`path`, resolved, if it lies inside `root` (resolved too); else the request fails."""
    if not isinstance(path, str) or not os.path.isabs(path):
        raise RpcFault(-32602, "the path must be absolute")
    real, base = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([real, base]) != base:
        raise RpcFault(-32602, "the path is outside the working directory")
    return real


class _Terminal:
    """One command: its process, the tail of its output, and its exit once it came."""

    def __init__(self, process: ChildProcess, limit: int) -> None:
        self.process = process
        self.limit = limit
        self.output = bytearray()
        self.truncated = False
        self.exited = trio.Event()
        self.status: dict[str, Any] | None = None
        self.end = trio.Event()
        """Set by `kill` and `release`: its task then ends the process group."""

    def take(self, chunk: bytes | bytearray) -> None:
        self.output += chunk
        over = len(self.output) - self.limit
        if over > 0:
            while over < len(self.output) and (self.output[over] & 0xC0) == 0x80:
                over += 1  # not inside a UTF-8 character
            del self.output[:over]
            self.truncated = True

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")


class Terminals:
    """The terminals of one agent process; see the module."""

    def __init__(self, config: AcpConfig) -> None:
        self.config = config
        self._ids = itertools.count(1)
        self._live: dict[str, _Terminal] = {}
        self._nursery: trio.Nursery | None = None
        """`serving()`'s own: only `create` starts a terminal's task in it."""

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Own the terminals for the block; every one still running ends with it."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                self._nursery = None
                nursery.cancel_scope.cancel()

    async def create(self, params: dict[str, Any]) -> dict[str, Any]:
        nursery = self._nursery
        if nursery is None:
            raise RpcFault(-32603, "the agent's connection is closing")
        if len(self._live) >= MAX_TERMINALS:
            raise RpcFault(-32000, f"{MAX_TERMINALS} terminals are open: release one first")
        command = params.get("command")
        args = params.get("args") or []
        if not isinstance(command, str) or not command or not isinstance(args, list):
            raise RpcFault(-32602, "a command (and a list of args) is needed")
        cwd = self.config.working_directory
        if params.get("cwd") is not None:
            cwd = confined(params.get("cwd"), cwd)
        env = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
        for variable in params.get("env") or ():
            if isinstance(variable, dict) and isinstance(variable.get("name"), str):
                env[variable["name"]] = str(variable.get("value", ""))
        wanted = params.get("outputByteLimit")
        limit = self.config.max_file_bytes
        if isinstance(wanted, int) and 0 <= wanted < limit:
            limit = wanted
        try:
            process = await spawn(
                [command, *map(str, args)], cwd=cwd, env=env, stderr_tail=1, what="the command"
            )
        except OSError as exc:
            raise RpcFault(-32002, f"cannot start {command!r}: {exc.strerror}") from None
        terminal = _Terminal(process, limit)
        terminal_id = f"term-{next(self._ids)}"
        self._live[terminal_id] = terminal
        nursery.start_soon(self._run, terminal, name=f"acp terminal {terminal_id}")
        return {"terminalId": terminal_id}

    async def output(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._terminal(params)
        await trio.lowlevel.checkpoint()
        answer: dict[str, Any] = {"output": terminal.text(), "truncated": terminal.truncated}
        if terminal.status is not None:
            answer["exitStatus"] = terminal.status
        return answer

    async def wait_for_exit(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._terminal(params)
        await terminal.exited.wait()
        assert terminal.status is not None
        return terminal.status

    async def kill(self, params: dict[str, Any]) -> None:
        terminal = self._terminal(params)
        terminal.end.set()
        await terminal.exited.wait()

    async def release(self, params: dict[str, Any]) -> None:
        terminal = self._terminal(params)
        terminal.end.set()
        await terminal.exited.wait()
        self._live.pop(str(params.get("terminalId")), None)

    def _terminal(self, params: dict[str, Any]) -> _Terminal:
        terminal = self._live.get(str(params.get("terminalId")))
        if terminal is None:
            raise RpcFault(-32602, "no such terminal")
        return terminal

    async def _run(self, terminal: _Terminal) -> None:
        """Read the command's output until it exits (or is ended), then reap it."""
        process = terminal.process
        try:
            await process.stdin.aclose()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_end_when_asked, terminal.end, nursery.cancel_scope)
                drained = [trio.Event(), trio.Event()]
                nursery.start_soon(_drain, process.stdout, terminal, drained[0])
                nursery.start_soon(_drain, process.proc.stderr, terminal, drained[1])
                await process.exited()
                # the rest of its output; a child it left holding the pipes is ended
                with trio.move_on_after(self.config.kill_grace):
                    for done in drained:
                        await done.wait()
                nursery.cancel_scope.cancel()
        finally:
            await process.stop(self.config.kill_grace)  # shielded, bounded
            terminal.status = _status(process)
            terminal.exited.set()


async def _end_when_asked(end: trio.Event, scope: trio.CancelScope) -> None:
    """`kill` or `release` asked for it: the terminal's own task stops waiting."""
    await end.wait()
    scope.cancel()


async def _drain(
    stream: trio.abc.ReceiveStream | None, terminal: _Terminal, drained: trio.Event
) -> None:
    try:
        if stream is not None:
            async for chunk in stream:
                terminal.take(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        drained.set()


def _status(process: ChildProcess) -> dict[str, Any]:
    code = process.proc.returncode
    if code is None:
        return {"exitCode": None, "signal": None}
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return {"exitCode": None, "signal": name}
    return {"exitCode": code, "signal": None}
