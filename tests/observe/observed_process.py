"""A `band-trio` command as a real process whose stderr is read line by line as it
comes, and `/metrics` scraped over a real socket and parsed by Prometheus' own
parser."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import trio
from prometheus_client.parser import text_string_to_metric_families

from support import stop_process

HERE = Path(__file__).parent
BAND_TRIO = [sys.executable, "-m", "band_trio"]
METRICS_LINE = re.compile(rb"metrics on (http://\S+/metrics)")


class Lines:
    """Every line the process wrote to stderr so far, and a wait for the next."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._changed = trio.Event()

    def add(self, line: str) -> None:
        self.lines.append(line)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[str], bool], count: int = 1) -> list[str]:
        """The lines matching `predicate`, once there are `count` of them (the caller
        sets the deadline)."""
        while True:
            found = [line for line in self.lines if predicate(line)]
            if len(found) >= count:
                return found
            await self._changed.wait()

    def records(self) -> list[dict[str, Any]]:
        """The JSON log lines (the command's own `band-trio …:` notices are plain text)."""
        return [json.loads(line) for line in self.lines if not line.startswith("band-trio ")]


class Command:
    """The process, its stdout and stderr lines, and its metrics URL (once it said it)."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.stdout = Lines()
        self.stderr = Lines()
        self.metrics_url: str | None = None

    async def read(self, stream: trio.abc.ReceiveStream, into: Lines) -> None:
        pending = b""
        while chunk := await stream.receive_some():
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                found = METRICS_LINE.search(raw)
                if found:
                    self.metrics_url = found.group(1).decode()
                into.add(raw.decode(errors="replace"))

    async def metrics(self) -> dict[str, float]:
        """One scrape: every sample as `name{label="value",...}` → value."""
        assert self.metrics_url is not None
        async with httpx2.AsyncClient() as client:
            response = await client.get(self.metrics_url)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        return samples(response.text)


def samples(text: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}"] = sample.value
    return found


@asynccontextmanager
async def command(
    *args: str, env: dict[str, str] | None = None, metrics: bool = True
) -> AsyncIterator[Command]:
    """Run `band-trio ARGS`, stdout and stderr read as they come; on the way out SIGTERM (then
    SIGKILL) by its own PID. With `metrics`, return once it says where they are."""
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    proc = await trio.lowlevel.open_process(
        [*BAND_TRIO, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
    )
    running = Command(proc)
    try:
        async with trio.open_nursery() as nursery:
            assert proc.stdout is not None and proc.stderr is not None
            nursery.start_soon(running.read, proc.stdout, running.stdout)
            nursery.start_soon(running.read, proc.stderr, running.stderr)
            if metrics:
                await running.stderr.wait_for(lambda line: "metrics on http" in line)
            try:
                yield running
            finally:
                await stop(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


stop = stop_process


def delta(before: dict[str, float], after: dict[str, float], prefix: str) -> dict[str, float]:
    """The samples of `prefix` that moved, by how much."""
    moved = {
        name: after[name] - before.get(name, 0.0)
        for name in after
        if name.startswith(prefix) and after[name] != before.get(name, 0.0)
    }
    return moved
