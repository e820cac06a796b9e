"""Peers shared by the tests of one worker: one process for each kind and arguments, and a
view of it for each test that sees only that test's events.

    from peers import shared_a2a_peer, shared_stubllm_peer

    async def test_something() -> None:
        async with shared_stubllm_peer() as peer:
            ...  # as with stubllm_peer(): peer.base_url, peer.wait_for(...), peer.events()

Why: starting an a2a-sdk server costs about 0.65 s of CPU and stubllm 0.5 s, and some
seventy tests use one; on the 2-core machine the suite is CPU-bound. A test that cares
about the peer as a process (its signals, its exit, its start-up) uses `a2a_peer()` or
`stubllm_peer()`, which start one of its own; so does a test whose client reads the
peer's state across tests (the A2A `ListTasks` lookups and orphan sweeps: their pages
would hold the tasks of earlier tests) or uses stubllm's stateful `[sequence]` fixture
(a view that meets it fails, naming the fix).

What a view guarantees, so that a test cannot tell the shared peer from its own:

- It is handed out only once the peer is quiet: every request the peer has received has
  ended (`response_end` for each `request`; both servers record the pair around every
  HTTP request). A peer that is not quiet within `QUIET_WITHIN` seconds, or that has
  exited, is killed and a new one started. Earlier tests' clients are closed by then, so
  no new request of theirs can arrive.
- Its events start where it was handed out. Events of work that outlives its requests
  (an A2A executor still running, a task's last state saved after its response) carry a
  `task_id` or `context_id` that the peer had already recorded, and are left out.
- stubllm numbers requests for the whole server; a view renumbers them from 1, as a
  fresh peer would (`req=1` is the test's first request).

A shared peer lives as long as its worker: killed and reaped when the worker exits, and
gone by itself if the worker is killed (it exits at the end of file on the stdin the
worker holds, as the benchmark's peers do).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import trio

from band_trio.bench._peer import _EXIT_WITH_DRIVER
from band_trio.bench._protocol import ORPHAN_ENV

from .fixtures import (
    A2A_SCRIPT,
    POLL_INTERVAL,
    STUBLLM_FIXTURES,
    STUBLLM_SCRIPT,
    Event,
    Peer,
    PeerError,
    _wait_ready,
    peer_argv,
)

QUIET_WITHIN = 5.0
"""How long a handed-out peer may take to end the requests of earlier tests."""

QUIET_AFTER = 1.0
"""How long a test's own open requests may take to end once it is done with the peer."""

START_WITHIN = 20.0

_running: dict[tuple[str, ...], Peer] = {}


class PeerView(Peer):
    """One test's view of a shared peer: the same process and files, its own events."""

    def __init__(self, base: Peer) -> None:
        super().__init__(
            base.name,
            base.process,  # type: ignore[arg-type]  # a Popen: poll(), pid, returncode
            base.workdir,
            base.events_path,
            base.ready_path,
            base.stderr_path,
        )
        self.ready = base.ready
        self._base = base
        before = base.events()
        self._seen = len(before)
        self._earlier = {
            e.get(key) for e in before for key in ("task_id", "context_id") if e.get(key)
        }
        self._req_base = max((int(e["req"]) for e in before if "req" in e), default=0)

    def _read_new(self) -> None:
        self._base._read_new()
        new = self._base._events[self._seen :]
        self._seen += len(new)
        for event in new:
            own = self._own(event)
            if own is not None:
                self._events.append(own)

    def _own(self, event: Event) -> Event | None:
        if any(event.get(key) in self._earlier for key in ("task_id", "context_id")):
            return None
        if "req" in event:
            if int(event["req"]) <= self._req_base:
                # A stream's generator closed by the collector, after its response ended.
                return None
            if event.get("event") == "match" and event.get("fixture") == "sequence":
                raise PeerError(
                    "stubllm's [sequence] fixture counts requests for the whole server:"
                    " a test that uses it needs stubllm_peer(), not a shared one"
                )
            event = {**event, "req": int(event["req"]) - self._req_base}
        return event


def _quiet(peer: Peer) -> bool:
    events = peer.events()
    started = sum(1 for e in events if e.get("event") == "request")
    ended = sum(1 for e in events if e.get("event") == "response_end")
    return started == ended


def _retire(key: tuple[str, ...]) -> None:
    _end(_running.pop(key))


def _end(peer: Peer) -> None:
    """Kill a shared peer by its pid and reap it (a test peer has nothing to save)."""
    process: subprocess.Popen[bytes] = peer.process  # type: ignore[assignment]
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.kill()
    process.wait()
    if process.stdin is not None:
        process.stdin.close()
    shutil.rmtree(peer.workdir, ignore_errors=True)


def _retire_all() -> None:
    for key in list(_running):
        _retire(key)


atexit.register(_retire_all)


async def _start(name: str, script: Path, args: list[str]) -> Peer:
    work = Path(tempfile.mkdtemp(prefix=f"band-trio-shared-{name}-"))
    events_path = work / f"{name}.events.jsonl"
    ready_path = work / f"{name}.ready.json"
    stderr_path = work / f"{name}.stderr"
    argv = [
        sys.executable,
        "-c",
        _EXIT_WITH_DRIVER,  # exits once our end of its stdin closes: a killed worker too
        *peer_argv(script, ready_path, events_path, args),
    ]
    with stderr_path.open("wb") as stderr:
        # A Popen, not trio.Process: the peer outlives this test's trio run. Its fork and
        # exec take a millisecond; waiting for it to be ready is `_wait_ready`'s.
        process = subprocess.Popen(  # noqa: ASYNC220
            argv,
            stdin=subprocess.PIPE,  # held, never written: see _EXIT_WITH_DRIVER
            stdout=stderr,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1", ORPHAN_ENV: "1"},
            cwd=work,
            start_new_session=True,  # no terminal SIGINT; it is killed by its own pid
        )
    peer = Peer(name, process, work, events_path, ready_path, stderr_path)  # type: ignore[arg-type]
    try:
        await _wait_ready(peer, START_WITHIN)
    except BaseException:
        _end(peer)
        raise
    return peer


async def _quiet_or_retired(key: tuple[str, ...], within: float) -> None:
    peer = _running[key]
    with trio.move_on_after(within):
        while peer.process.poll() is None:
            if _quiet(peer):
                return
            await trio.sleep(POLL_INTERVAL)
    _retire(key)


@asynccontextmanager
async def _shared(name: str, script: Path, args: list[str]) -> AsyncIterator[Peer]:
    key = (name, *args)
    if key in _running:
        await _quiet_or_retired(key, QUIET_WITHIN)
    if key not in _running:
        _running[key] = await _start(name, script, args)
    base = _running[key]
    try:
        yield PeerView(base)
    finally:
        # A request still open when the test is done (a CancelTask the executor swallowed
        # never answers) would hold up the next test: the peer goes now instead.
        if _running.get(key) is base:
            with trio.CancelScope(shield=True):
                await _quiet_or_retired(key, QUIET_AFTER)


@asynccontextmanager
async def shared_a2a_peer() -> AsyncIterator[Peer]:
    """`a2a_peer()`, shared by the worker's tests (see the module's docstring)."""
    async with _shared("a2a", A2A_SCRIPT, []) as peer:
        yield peer


@asynccontextmanager
async def shared_stubllm_peer(
    *, chunk_delay_ms: int = 50, raw: bool = False
) -> AsyncIterator[Peer]:
    """`stubllm_peer()` with the default fixtures, shared by the worker's tests (see the
    module's docstring); one process for each `chunk_delay_ms` and `raw`."""
    args = ["--chunk-delay-ms", str(chunk_delay_ms), "--fixture-file", str(STUBLLM_FIXTURES)]
    if raw:
        args.append("--raw")
    async with _shared("stubllm", STUBLLM_SCRIPT, args) as peer:
        yield peer


def shared_peers() -> dict[tuple[str, ...], Any]:
    """The worker's running shared peers by kind and arguments (for the peers' own tests)."""
    return dict(_running)
