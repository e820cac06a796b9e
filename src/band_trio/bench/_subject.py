"""An agent under test, seen from the driver: its process and what it observed.

Each runtime runs in its own process, started here with `trio.run_process`
in the driver's nursery and read line by line: the observation lines
(`_protocol`) are indexed by kind and message id as they arrive, and a task
waiting for one is woken by the line itself, not by polling. The driver
stops it with SIGTERM and times the exit; a subject that outlives the
driver's deadline is killed, so no process is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal

import trio

from ._peer import copilot_cli, opencode_bin
from ._protocol import ORPHAN_ENV, Observation, parse_observation

__all__ = ["Identity", "Runtime", "Subject", "environment", "spawn", "start"]

Runtime = Literal["band-trio", "band-sdk", "floor"]

KILL_WAIT = 5.0

SHUTDOWN_GRACE = 30.0
"""Both runtimes' default graceful-shutdown bound, passed explicitly to band-trio."""


@dataclass(frozen=True, slots=True)
class Identity:
    """One agent identity on the platform, with the rooms it is a participant of."""

    runtime: Runtime
    agent_id: str
    api_key: str
    rooms: tuple[str, ...]


@dataclass(eq=False)
class Subject:
    identity: Identity
    process: trio.Process
    launched: float
    seen: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    values: dict[str, int] = field(default_factory=dict)
    """The number an observation carried (`n`), by message id."""
    junk_lines: int = 0
    stderr_tail: list[str] = field(default_factory=list)
    _changed: trio.Event = field(default_factory=trio.Event)

    @property
    def runtime(self) -> Runtime:
        return self.identity.runtime

    def _record(self, observation: Observation) -> None:
        self.seen[(observation.kind, observation.message_id)].append(observation.t)
        if observation.n is not None:
            self.values[observation.message_id] = observation.n
        self._changed.set()
        self._changed = trio.Event()

    async def wait(self, kind: str, message_id: str, nth: int = 1) -> float:
        """The stamp of the `nth` observation of `kind` for the message (caller's deadline)."""
        key = (kind, message_id)
        while len(self.seen.get(key, ())) < nth:
            if self.process.returncode is not None:
                raise RuntimeError(f"{self.runtime} exited ({self.process.returncode})")
            await self._changed.wait()
        return self.seen[key][nth - 1]

    def count(self, kind: str, message_id: str) -> int:
        return len(self.seen.get((kind, message_id), ()))

    async def terminate(self, deadline: float) -> float | None:
        """SIGTERM, then the seconds until the process exited, or None (then killed)."""
        sent = time.perf_counter()
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        with trio.move_on_after(deadline):
            await self.process.wait()
            return time.perf_counter() - sent
        self.process.kill()
        await self.process.wait()
        return None


def _command(identity: Identity, grace: float) -> list[str]:
    if identity.runtime == "band-trio":
        return [
            sys.executable,
            "-m",
            "band_trio",
            "agent",
            "--adapter",
            "band_trio.bench._trio_subject:adapter",
            "--shutdown-grace",
            str(grace),
        ]
    return [
        sys.executable,
        "-m",
        "band_trio.bench._sdk_subject",
        identity.agent_id,
        identity.api_key,
    ]


def environment(identity: Identity, rest_url: str, ws_url: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "VIRTUAL_ENV", "BAND_BENCH_RUN",
            "PYTHONPATH")  # fmt: skip  # PYTHONPATH: the driver's tree runs the subjects too
    env = {k: v for k, v in os.environ.items() if k in keep}
    if identity.runtime == "band-trio":  # tracing on or off for the agent under test
        env.update((k, v) for k, v in os.environ.items() if k == "BAND_TRACES" or k[:5] == "OTEL_")
    env.update(
        BAND_REST_URL=rest_url,
        BAND_WS_URL=ws_url,
        BAND_AGENT_ID=identity.agent_id,
        BAND_API_KEY=identity.api_key,
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    cli = copilot_cli()
    if cli is not None and identity.runtime == "band-trio":
        env["BAND_COPILOT_CLI"] = cli  # the Copilot scenario's CLI, owned by the subject
    opencode = opencode_bin()
    if opencode is not None and identity.runtime == "band-trio":
        env["BAND_OPENCODE_BIN"] = opencode  # the ACP scenario's agent, owned by the subject
    return env


async def spawn(
    nursery: trio.Nursery,
    identity: Identity,
    rest_url: str,
    ws_url: str,
    *,
    grace: float = SHUTDOWN_GRACE,
) -> Subject:
    """Start the agent's process; its output is read by tasks in `nursery`."""
    env = {**environment(identity, rest_url, ws_url), ORPHAN_ENV: "1"}
    return await start(nursery, identity, _command(identity, grace), env, stdin=subprocess.PIPE)


async def start(
    nursery: trio.Nursery,
    identity: Identity,
    argv: list[str],
    env: dict[str, str],
    *,
    stdin: int = subprocess.DEVNULL,
) -> Subject:
    """Start any process that speaks the observation protocol on its stdout."""
    launched = time.perf_counter()
    process = await trio.lowlevel.open_process(
        argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    subject = Subject(identity, process, launched)
    nursery.start_soon(_owned, process)
    nursery.start_soon(_read_observations, subject)
    nursery.start_soon(_read_stderr, subject)
    return subject


async def _owned(process: trio.Process) -> None:
    """Tie the process to the nursery: if the run is cancelled (a signal, an error)
    before the process has exited, it is killed and reaped; none outlives the driver."""
    try:
        await process.wait()
    finally:
        if process.stdin is not None:  # its end of file tells a subject the driver is gone
            with trio.CancelScope(shield=True):
                await process.stdin.aclose()
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True), trio.move_on_after(KILL_WAIT):
                await process.wait()


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[str]:
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace")
    if buffer:
        yield buffer.decode("utf-8", "replace")


async def _read_observations(subject: Subject) -> None:
    assert subject.process.stdout is not None
    async with subject.process.stdout:
        async for line in _lines(subject.process.stdout):
            observation = parse_observation(line)
            if observation is None:
                subject.junk_lines += 1
            else:
                subject._record(observation)
    subject._changed.set()


async def _read_stderr(subject: Subject) -> None:
    assert subject.process.stderr is not None
    async with subject.process.stderr:
        async for line in _lines(subject.process.stderr):
            subject.stderr_tail = [*subject.stderr_tail[-199:], line]
