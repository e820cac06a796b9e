"""A remote peer for the remote-stop scenarios, run as a process of its own.

The peers are real servers — stubllm 0.1.5 and an a2a-sdk 1.3.0 agent under
uvicorn (`_peers/`, the `bench` extra) — that record what they saw as JSON
lines, each stamped with the server's own `time.perf_counter()`. Here their
events file is a FIFO the driver reads through a trio stream (a writer end
is held open so the reader never sees an end of file), so an event is seen
as it is written, with no polling. `open_peer` owns the process: SIGTERM on
the way out, SIGKILL if it lingers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from ._protocol import ORPHAN_ENV

__all__ = ["PEERS", "Event", "Peer", "copilot_cli", "open_peer", "opencode_bin", "peer_missing"]

PEERS = Path(__file__).resolve().parent / "_peers"
START_DEADLINE = 30.0
STOP_DEADLINE = 5.0

Event = dict[str, Any]

_EXIT_WITH_DRIVER = (
    "import runpy, sys; from band_trio.bench._protocol import exit_with_driver; "
    "exit_with_driver(); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)
"""Run a peer script so that it exits when the driver dies (its stdin's end of file)."""


def peer_missing(name: str) -> str | None:
    """Why the `name` peer cannot run here (a missing package or program), or None."""
    import importlib.util

    needs = {"a2a": ("a2a", "uvicorn"), "anthropic": ("stubllm", "uvicorn", "anthropic")}.get(
        name, ("stubllm", "uvicorn")
    )
    missing = [module for module in needs if importlib.util.find_spec(module) is None]
    if missing:
        extras = "bench,anthropic" if name == "anthropic" else "bench"
        return f"needs {', '.join(missing)}: pip install 'band-trio[{extras}]'"
    if name == "copilot" and copilot_cli() is None:
        return (
            "needs the GitHub Copilot CLI: npm install @github/copilot, then set "
            "BAND_COPILOT_CLI to its binary (node_modules/@github/copilot-<os>-<cpu>/copilot)"
        )
    if name == "acp" and opencode_bin() is None:
        return (
            "needs OpenCode (an ACP agent): npm install opencode-ai, then set "
            "BAND_OPENCODE_BIN to its binary (node_modules/opencode-<os>-<cpu>/bin/opencode)"
        )
    return None


def opencode_bin() -> str | None:
    """The OpenCode binary the ACP row runs (`BAND_OPENCODE_BIN`, else `opencode` on PATH)."""
    import shutil

    found = os.environ.get("BAND_OPENCODE_BIN") or shutil.which("opencode")
    return found if found and os.path.isfile(found) and os.access(found, os.X_OK) else None


def copilot_cli() -> str | None:
    """The Copilot CLI the bench runs (`BAND_COPILOT_CLI`, else `copilot` on PATH), if any."""
    import shutil

    found = os.environ.get("BAND_COPILOT_CLI") or shutil.which("copilot")
    return found if found and os.path.isfile(found) and os.access(found, os.X_OK) else None


class Peer:
    def __init__(self, name: str, process: trio.Process) -> None:
        self.name = name
        self.process = process
        self.events: list[Event] = []
        self.ready: Event = {}
        self._changed = trio.Event()

    def _add(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = trio.Event()

    async def wait(self, since: int, predicate: Callable[[Event], bool]) -> Event:
        """The first event at index `since` or later that matches (caller's deadline)."""
        index = since
        while True:
            while index < len(self.events):
                if predicate(self.events[index]):
                    return self.events[index]
                index += 1
            if self.process.returncode is not None:
                raise RuntimeError(f"the {self.name} peer exited ({self.process.returncode})")
            await self._changed.wait()


async def _read(peer: Peer, stream: trio.lowlevel.FdStream) -> None:
    buffer = b""
    async with stream:
        while chunk := await stream.receive_some():
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    peer._add(event)


@asynccontextmanager
async def open_peer(name: str, script: str, *args: str) -> AsyncIterator[Peer]:
    """Run `_peers/<script>` on 127.0.0.1 until the block ends; ready once it says so."""
    with tempfile.TemporaryDirectory(prefix=f"band-bench-{name}-") as folder:
        fifo = os.path.join(folder, "events")
        os.mkfifo(fifo)
        stream = trio.lowlevel.FdStream(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        argv = [sys.executable, "-c", _EXIT_WITH_DRIVER, str(PEERS / script), "--port", "0"]
        argv += ["--ready-file", os.path.join(folder, "ready"), "--events-file", fifo, *args]
        try:
            async with trio.open_nursery() as nursery:
                process = await trio.lowlevel.open_process(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, env={**os.environ, ORPHAN_ENV: "1"},
                )  # fmt: skip
                peer = Peer(name, process)
                nursery.start_soon(_read, peer, stream)
                try:
                    with trio.fail_after(START_DEADLINE):
                        peer.ready = await peer.wait(0, lambda e: e.get("event") == "ready")
                    yield peer
                finally:
                    with trio.CancelScope(shield=True):
                        await _stop(process)
                    nursery.cancel_scope.cancel()
        finally:
            os.close(writer)


async def _stop(process: trio.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    with trio.move_on_after(STOP_DEADLINE):
        await process.wait()
        return
    process.kill()
    await process.wait()
