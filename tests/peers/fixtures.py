"""Trio helpers that run the local test peers as subprocesses and read what they observed.

    from peers import a2a_peer, stubllm_peer

    async def test_something() -> None:
        async with a2a_peer() as peer:
            ...  # talk to peer.url with httpx2
            event = await peer.wait_for(lambda e: e["event"] == "terminal", timeout=5)
            # or, the same with keyword matching:
            event = await peer.wait_for(event="terminal", task_id=task_id)

Each peer is a real server (a2a-sdk 1.3.0 or stubllm 0.1.5 under uvicorn) on 127.0.0.1 with
an OS-chosen port, started with ``sys.executable``. Nothing of them is imported into the test
process. Each writes one JSON object per line to its events file; every event has ``event``
(its name), ``perf`` (time.perf_counter() in the server: comparable with the test's own
perf_counter on the same host) and ``time`` (time.time()).

A2A events (src/band_trio/bench/_peers/a2a_server.py):
    ready             port, url, pid
    request           http_method, path, method (JSON-RPC method or None), jsonrpc_id,
                      a2a_version (the A2A-Version header or None), body (the parsed JSON)
    cancel_request    task_id, protocol ("jsonrpc-1.0" | "jsonrpc-0.3" | "rest"), jsonrpc_id
                      (one per CancelTask / tasks/cancel / POST /tasks/{id}:cancel)
    execute_started   task_id, context_id, text, mode, chunks, delay, cancel_delay
    unknown_mode      task_id, mode                  (the task then FAILS)
    message_sent      message_id, context_id                         (mode=message)
    task_created      task_id, context_id           (first save of the task in the store)
    task_state        task_id, state ("TASK_STATE_WORKING", ...)      (every state change)
    terminal          task_id, state, artifacts (number of artifacts) (terminal state saved)
    chunk_sent        task_id, index (0-based)
    cancel_called     task_id, mode                  (the SDK called executor.cancel())
    cancel_published  task_id, mode                  (mode=normal: CANCELED enqueued)
    cancel_refused    task_id, mode                  (mode=stubborn: raising)
    executor_cancelled task_id, mode, swallowed      (execute() got CancelledError)
    execute_finished  task_id, mode, how ("returned" | "cancelled" | "raised")
    disconnect        path, method, jsonrpc_id, after_response (False: the client left early)
    response_end      path, method, jsonrpc_id, status
    signal            signum                         (SIGTERM received; shutting down)

stubllm events (src/band_trio/bench/_peers/stubllm_server.py):
    ready             port, url, base_url, pid
    request           req (1, 2, ...), http_method, path, body (the full request JSON)
    match             req, fixture, call_index
    stream_started    req, fixture
    chunk             req, count, kind ("content" | "tool_calls" | "finish" | "done"; on
                      /v1/messages the Anthropic event's name: "message_start", ...)
    stream_cancelled  req, count, how ("cancelled" | "closed")
    stream_completed  req, count
    disconnect        req, path, after_response
    response_end      req, path, status
    signal            signum
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import trio

from band_trio.bench._peer import PEERS

A2A_SCRIPT = PEERS / "a2a_server.py"
FAULT_PROXY_SCRIPT = PEERS / "fault_proxy.py"
STUBLLM_SCRIPT = PEERS / "stubllm_server.py"
STUBLLM_FIXTURES = PEERS / "stubllm_fixtures.yaml"

Event = dict[str, Any]
Predicate = Callable[[Event], bool]

POLL_INTERVAL = 0.005


class PeerError(AssertionError):
    """A peer failed to start, died, or an awaited event did not come in time."""


class Peer:
    """A running peer process: its address, its events and its stderr."""

    def __init__(
        self,
        name: str,
        process: trio.Process,
        workdir: Path,
        events_path: Path,
        ready_path: Path,
        stderr_path: Path,
    ) -> None:
        self.name = name
        self.process = process
        self.workdir = workdir
        self.events_path = events_path
        self.ready_path = ready_path
        self.stderr_path = stderr_path
        self.ready: dict[str, Any] = {}
        self._events: list[Event] = []
        self._offset = 0
        self._partial = b""

    # -- addresses ------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        return int(self.ready["port"])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:N/``: the A2A JSON-RPC endpoint; the stubllm root."""
        return str(self.ready["url"])

    @property
    def base_url(self) -> str:
        """stubllm: ``http://127.0.0.1:N/v1`` (OpenAI base URL). A2A: the url without ``/``."""
        return str(self.ready.get("base_url", self.url.rstrip("/")))

    # -- events ---------------------------------------------------------------------------------

    def _read_new(self) -> None:
        try:
            with self.events_path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        self._offset += len(data)
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        for line in lines:
            if line.strip():
                self._events.append(json.loads(line))

    def events(self, name: str | None = None) -> list[Event]:
        """All events recorded so far (optionally only those named ``name``)."""
        self._read_new()
        if name is None:
            return list(self._events)
        return [e for e in self._events if e.get("event") == name]

    def mark(self) -> int:
        """The number of events so far: pass it as ``since=`` to wait only for newer ones."""
        self._read_new()
        return len(self._events)

    def find(
        self, predicate: Predicate | None = None, *, since: int = 0, **match: Any
    ) -> Event | None:
        """The first event so far (from index ``since``) that matches, or None."""
        check = _matcher(predicate, match)
        self._read_new()
        for event in self._events[since:]:
            if check(event):
                return event
        return None

    async def wait_for(
        self,
        predicate: Predicate | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109 (the helper's documented API)
        *,
        since: int = 0,
        **match: Any,
    ) -> Event:
        """Wait until an event (from index ``since``) satisfies ``predicate`` and ``match``.

        ``match`` compares keys for equality: ``wait_for(event="terminal", task_id=tid)``.
        Events already recorded count, so the order of the call and the event does not
        matter. Raises PeerError on timeout or if the peer exits first.
        """
        check = _matcher(predicate, match)
        try:
            with trio.fail_after(timeout):
                while True:
                    found = self.find(check, since=since)
                    if found is not None:
                        return found
                    if self.process.poll() is not None:
                        found = self.find(check, since=since)
                        if found is not None:
                            return found
                        raise PeerError(
                            f"{self.name} peer exited (rc={self.process.returncode}) while"
                            f" waiting for {_describe(predicate, match)}{self.diagnostics()}"
                        )
                    await trio.sleep(POLL_INTERVAL)
        except trio.TooSlowError:
            raise PeerError(
                f"no {self.name} event matched {_describe(predicate, match)}"
                f" within {timeout} s{self.diagnostics()}"
            ) from None

    # -- diagnostics ----------------------------------------------------------------------------

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def diagnostics(self, last: int = 15) -> str:
        tail = "\n".join(json.dumps(e)[:300] for e in self.events()[-last:])
        err = self.stderr()[-4000:]
        return f"\n--- last {last} events ---\n{tail}\n--- stderr ---\n{err}"


def installed_binary(variable: str, stamp: Path, version: str, package: str) -> Path:
    """A binary that `python3 dev.py test` installed with npm: the one named by the
    environment `variable` it sets, else by its install `stamp` (`version` and path).
    A missing one is a `PeerError` naming the fix: a test never skips for want of it."""
    named = os.environ.get(variable)
    if not named and stamp.is_file():
        stamped, _, named = stamp.read_text().partition("\n")
        if stamped != version:
            named = ""
    if named and Path(named).is_file():
        return Path(named)
    raise PeerError(
        f"{package}@{version} is not installed ({variable}={named or 'unset'}): run"
        f" `python3 dev.py test`, which installs it with npm into .tools/{stamp.parent.name},"
        f" or set {variable} to its binary"
    )


def _matcher(predicate: Predicate | None, match: Mapping[str, Any]) -> Predicate:
    def check(event: Event) -> bool:
        if any(event.get(k) != v for k, v in match.items()):
            return False
        return predicate is None or bool(predicate(event))

    return check


def _describe(predicate: Predicate | None, match: Mapping[str, Any]) -> str:
    parts = [f"{k}={v!r}" for k, v in match.items()]
    if predicate is not None:
        parts.append(getattr(predicate, "__name__", repr(predicate)))
    return ", ".join(parts) or "any event"


def peer_argv(script: Path, ready_path: Path, events_path: Path, args: list[str]) -> list[str]:
    """A peer script's command line after the interpreter: an OS-chosen port, and where
    it writes its ready file and its events."""
    return [
        str(script),
        "--port",
        "0",
        "--ready-file",
        str(ready_path),
        "--events-file",
        str(events_path),
        *args,
    ]


@asynccontextmanager
async def _run_peer(
    name: str,
    script: Path,
    extra_args: list[str],
    *,
    workdir: Path | None,
    start_timeout: float,
    stop_timeout: float,
) -> AsyncIterator[Peer]:
    own_dir = workdir is None
    work = Path(tempfile.mkdtemp(prefix=f"band-trio-{name}-")) if workdir is None else workdir
    work.mkdir(parents=True, exist_ok=True)
    events_path = work / f"{name}.events.jsonl"
    ready_path = work / f"{name}.ready.json"
    stderr_path = work / f"{name}.stderr"
    for stale in (events_path, ready_path):
        stale.unlink(missing_ok=True)
    argv = [sys.executable, *peer_argv(script, ready_path, events_path, extra_args)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stderr,
            stderr=stderr,
            env=env,
            cwd=work,
            start_new_session=True,  # no terminal SIGINT; we signal it by its own pid
        )
    peer = Peer(name, process, work, events_path, ready_path, stderr_path)
    try:
        await _wait_ready(peer, start_timeout)
        yield peer
    finally:
        with trio.CancelScope(shield=True):
            await _stop(process, stop_timeout)
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)


async def _wait_ready(peer: Peer, limit: float) -> None:
    try:
        with trio.fail_after(limit):
            while not peer.ready_path.exists():
                if peer.process.poll() is not None:
                    raise PeerError(
                        f"{peer.name} peer exited during startup"
                        f" (rc={peer.process.returncode}){peer.diagnostics()}"
                    )
                await trio.sleep(POLL_INTERVAL)
    except trio.TooSlowError:
        raise PeerError(
            f"{peer.name} peer not ready within {limit} s{peer.diagnostics()}"
        ) from None
    peer.ready = json.loads(peer.ready_path.read_text("utf-8"))


async def _stop(process: trio.Process, grace: float) -> None:
    """SIGTERM by pid, wait at most ``grace`` seconds, then SIGKILL; always reap the process."""
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with trio.move_on_after(grace):
            await process.wait()
    if process.poll() is None:
        with suppress(ProcessLookupError):
            process.kill()
        await process.wait()


@asynccontextmanager
async def a2a_peer(
    *,
    workdir: Path | None = None,
    start_timeout: float = 20.0,
    stop_timeout: float = 5.0,
) -> AsyncIterator[Peer]:
    """An a2a-sdk 1.3.0 server (JSON-RPC 1.0 + 0.3 compat, HTTP+JSON) on 127.0.0.1.

    Choose the behaviour per message with its text, e.g. ``mode=normal chunks=40 delay=0.05``
    (modes: normal, silent, stubborn, swallow, message, quick, fail; see a2a_server.py).
    ``peer.url`` is the JSON-RPC endpoint; send ``A2A-Version: 1.0`` for the 1.0 methods.
    The server's graceful shutdown is 2 s, so a hung CancelTask (mode=swallow) delays exit by
    about 2 s; ``stop_timeout`` bounds the wait before SIGKILL.
    """
    async with _run_peer(
        "a2a",
        A2A_SCRIPT,
        [],
        workdir=workdir,
        start_timeout=start_timeout,
        stop_timeout=stop_timeout,
    ) as peer:
        yield peer


@asynccontextmanager
async def stubllm_peer(
    *,
    chunk_delay_ms: int = 50,
    fixture_file: Path | None = None,
    raw: bool = False,
    workdir: Path | None = None,
    start_timeout: float = 20.0,
    stop_timeout: float = 5.0,
) -> AsyncIterator[Peer]:
    """stubllm 0.1.5 (OpenAI-compatible chat completions and Anthropic Messages, SSE) on 127.0.0.1.

    Choose a fixture with a marker in a user message (bench/_peers/stubllm_fixtures.yaml):
    ``[slow]`` 80 chunks ``chunk_delay_ms`` apart; ``[quick]``; ``[tool]`` a tool call, then a
    plain answer once the conversation holds a tool message; ``[tool-slow]`` a tool call, then
    a slow answer; ``[tools2]`` two parallel tool calls; ``[sequence]`` stubllm's stateful
    sequence; ``[error]`` HTTP 500; ``[blocks]`` text and two tool calls in one answer.
    ``peer.base_url`` is the OpenAI base URL (``.../v1``), ``peer.url`` Anthropic's (the
    SDK adds ``/v1/messages``), whose stream is Anthropic's documented event sequence.
    ``raw=True`` streams as stubllm does: tool calls all at ``index: 0`` with no
    ``finish_reason: "tool_calls"`` chunk, and its own Anthropic approximation.
    """
    args = [
        "--chunk-delay-ms",
        str(chunk_delay_ms),
        "--fixture-file",
        str(fixture_file or STUBLLM_FIXTURES),
    ]
    if raw:
        args.append("--raw")
    async with _run_peer(
        "stubllm",
        STUBLLM_SCRIPT,
        args,
        workdir=workdir,
        start_timeout=start_timeout,
        stop_timeout=stop_timeout,
    ) as peer:
        yield peer


@asynccontextmanager
async def fault_proxy(
    upstream: str | None = None,
    *,
    endless_ceiling: int = 64 * 1024 * 1024,
    workdir: Path | None = None,
    start_timeout: float = 20.0,
    stop_timeout: float = 5.0,
) -> AsyncIterator[Peer]:
    """The project's fault-injecting proxy (bench/_peers/fault_proxy.py) in front of
    `upstream` (a peer's root URL), on 127.0.0.1. Script what the attempts at a
    request meet with `await plan(proxy, "text in it", [{"status": 503}, ...])`;
    `proxy.url` is where clients go instead of the peer. Its events: `request` (n,
    method, path, match, step), `response_end` (n, status, events, how; for an endless
    body also `sent` and `dropped`: the client went away before the ceiling), `rule`."""
    args = ["--endless-ceiling", str(endless_ceiling)]
    if upstream is not None:
        args += ["--upstream", upstream.rstrip("/")]
    async with _run_peer(
        "fault-proxy",
        FAULT_PROXY_SCRIPT,
        args,
        workdir=workdir,
        start_timeout=start_timeout,
        stop_timeout=stop_timeout,
    ) as peer:
        yield peer


async def plan(proxy: Peer | int, match: str, steps: list[dict[str, Any]]) -> None:
    """Give the requests containing `match` these steps, one per request, in order
    (`proxy`: the fault proxy, or its port)."""
    port = proxy if isinstance(proxy, int) else proxy.port
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        body = json.dumps({"match": match, "plan": steps}).encode()
        head = (
            f"POST /__faults__ HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        await stream.send_all(head.encode() + body)
        answer = b""
        while chunk := await stream.receive_some(4096):
            answer += chunk
    if not answer.startswith(b"HTTP/1.1 204"):
        raise PeerError(f"the fault proxy refused the plan: {answer[:200]!r}")
