"""Test helpers: a recording adapter and an agent that runs for the length of a block."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from band_trio import Adapter, Agent, Policy, StopResult, Turn
from band_trio.contract import Message, Participant, Question
from band_trio.contract._process import _group_alive as group_alive
from band_trio.platform import Platform
from band_trio.testing import RecordingAdapter, TaskTracker
from band_trio.testing import client_sockets as client_sockets
from band_trio.testing._chaos import _each_done

Recorder = RecordingAdapter


async def echo(turn: Turn) -> None:
    await turn.reply(f"echo: {turn.message.content}")


def agent_for(platform: Platform, adapter: Adapter, **kwargs: Any) -> Agent:
    info = platform.info
    assert info.agent_id and info.api_key
    settings: dict[str, Any] = {
        "agent_id": info.agent_id,
        "api_key": info.api_key,
        "rest_url": info.rest_url,
        "ws_url": info.ws_url,
    }
    return Agent(adapter, **{**settings, **kwargs})


def agent_env(platform: Platform) -> dict[str, str]:
    """The seeded agent's settings, as `band-trio agent` reads them from the environment."""
    info = platform.info
    assert info.agent_id and info.api_key
    return {
        "BAND_REST_URL": info.rest_url,
        "BAND_WS_URL": info.ws_url,
        "BAND_AGENT_ID": info.agent_id,
        "BAND_API_KEY": info.api_key,
    }


async def stop_process(proc: trio.Process, grace: float = 10) -> None:
    """Stop a child process by its own PID: SIGTERM, then SIGKILL after `grace`."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(grace) as waited:
            await proc.wait()
        if waited.cancelled_caught:
            proc.kill()
            await proc.wait()


class Running:
    """The handle `running_agent` yields: the agent, its task tracker, its stop result."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.tasks = TaskTracker()
        self.stop_result: StopResult | None = None

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        self.tasks.adopt()
        await self.agent.run(task_status=task_status)


@asynccontextmanager
async def running_agent(
    platform: Platform, adapter: Adapter, *, policy: Policy | None = None, **kwargs: Any
) -> AsyncIterator[Running]:
    """Start an agent (connected, rooms joined) and stop it gracefully on exit."""
    agent = agent_for(platform, adapter, policy=policy, **kwargs)
    handle = Running(agent)
    trio.lowlevel.add_instrument(handle.tasks)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(handle.run)
            try:
                yield handle
            finally:
                with trio.fail_after(10):
                    handle.stop_result = await agent.stop()
    finally:
        trio.lowlevel.remove_instrument(handle.tasks)
    assert handle.tasks.root_exited
    assert handle.tasks.living == set(), f"tasks outlived the agent: {handle.tasks.living}"


def seeded(platform: Platform) -> tuple[str, str, str]:
    """The seeded agent's, room's and user's ids."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    return info.agent_id, info.room_id, info.user_id


def rooms_with_the_agent(platform: Platform, count: int) -> list[str]:
    """The seeded room and `count - 1` new ones, each with the seeded user and agent."""
    info = platform.info
    assert info.room_id and info.user_id and info.agent_id
    return [info.room_id] + [
        platform.create_room(title=f"room {i}", participants=[info.user_id, info.agent_id]).id or ""
        for i in range(count - 1)
    ]


def status(platform: Platform, message_id: str) -> str | None:
    """The seeded agent's delivery status of a message."""
    agent_id = platform.info.agent_id
    assert agent_id
    entry = platform.delivery(message_id).get(agent_id)
    return None if entry is None else str(entry["status"])


def each_done(items: Iterable[str], done: Callable[[str], bool]) -> Callable[[], bool]:
    """For `wait_until`: true once `done(item)` holds for every one of `items`, each
    checked about once rather than all at every change (the chaos run's settle
    predicate: 300 queued messages took a quarter of a million status reads)."""
    return _each_done(list(items), done)


def all_processed(platform: Platform, messages: Iterable[str]) -> Callable[[], bool]:
    """For `platform.wait_until`: every one of `messages` is `processed` (seeded agent)."""
    return each_done(messages, lambda m: status(platform, m) == "processed")


def server_sockets(port: int) -> set[int]:
    """The peer ports of this process's open connections accepted on `port` (a server
    the test runs in-process): what its server still holds, one fd each. Reads
    `/proc/net/tcp` and `/proc/net/tcp6` (Linux)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    peers = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            if state != _LISTEN and inode in inodes and int(local.rsplit(":", 1)[1], 16) == port:
                peers.add(int(remote.rsplit(":", 1)[1], 16))
    return peers


_LISTEN = "0A"


def ws_opens(platform: Platform) -> int:
    """Websocket upgrades the platform accepted so far."""
    return sum(1 for e in platform.log() if e.kind == "ws_open" and e.status == 101)


def claims(platform: Platform, message_id: str) -> int:
    """How many `POST .../processing` the platform answered for a message."""
    return sum(
        1
        for e in platform.log()
        if e.kind == "rest" and e.path and e.path.endswith(f"/{message_id}/processing")
    )


def replies(platform: Platform, room_id: str) -> list[str]:
    agent_id = platform.info.agent_id
    return [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]


class Background:
    """An agent run started with `start_soon` (not waiting for it to be ready)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.tasks = TaskTracker()
        self.started = trio.Event()
        self.finished = trio.Event()
        self.error: BaseException | None = None
        self._scope = trio.CancelScope()

    async def run(self) -> None:
        self.tasks.adopt()
        try:
            with self._scope:
                await self.agent.run(task_status=_Started(self.started))
        except BaseException as exc:  # recorded for the test to look at
            self.error = exc
        finally:
            self.finished.set()

    def cancel(self) -> None:
        """Cancel the run from outside the agent: its caller giving up on it."""
        self._scope.cancel()


class _Started:
    """A `task_status` for a run that was not started with `nursery.start`."""

    def __init__(self, event: trio.Event) -> None:
        self._event = event

    def started(self, value: object = None) -> None:
        self._event.set()


@asynccontextmanager
async def background_agent(
    platform: Platform,
    adapter: Adapter | None = None,
    *,
    agent: Agent | None = None,
    policy: Policy | None = None,
    **kwargs: Any,
) -> AsyncIterator[Background]:
    """Run an agent (a new one for `adapter`, or `agent` again) in the background for
    the block; on exit stop it if it still runs, and check that it returned and left
    no task behind."""
    if agent is None:
        assert adapter is not None
        agent = agent_for(platform, adapter, policy=policy, **kwargs)
    handle = Background(agent)
    trio.lowlevel.add_instrument(handle.tasks)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle.run)
            try:
                yield handle
            finally:
                with trio.fail_after(10):
                    if not handle.finished.is_set():
                        await handle.agent.stop()
                    await handle.finished.wait()
    finally:
        trio.lowlevel.remove_instrument(handle.tasks)
    assert handle.tasks.living == set(), f"tasks outlived the agent: {handle.tasks.living}"


class PidPipe:
    """A named pipe a script writes pids to (`echo $! >> "$PIPE"`), read as they come.

    Another process's writes can be awaited this way, with no polling: the pipe is
    read through a trio stream, and the test keeps a writer end open itself so the
    reader never sees an end of file between the script's writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pids: list[int] = []
        self._buffer = b""
        os.mkfifo(path)
        self._stream = trio.lowlevel.FdStream(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        self._writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)

    async def wait(self, count: int) -> list[int]:
        """The pids written so far, once there are at least `count` (caller's deadline)."""
        while len(self.pids) < count:
            chunk = await self._stream.receive_some()
            *lines, self._buffer = (self._buffer + chunk).split(b"\n")
            self.pids += [int(line) for line in lines if line.strip()]
        return list(self.pids)

    async def aclose(self) -> None:
        os.close(self._writer)
        await self._stream.aclose()


@asynccontextmanager
async def pid_pipe(path: Path) -> AsyncIterator[PidPipe]:
    pipe = PidPipe(path)
    try:
        yield pipe
    finally:
        await pipe.aclose()


async def wait_group_gone(pgid: int, deadline: float) -> None:
    """Until no process of group `pgid` is alive, a zombie aside. Polled: nothing can be
    awaited for processes that are not the test's children."""
    with trio.fail_after(deadline):
        while group_alive(pgid):
            await trio.sleep(0.01)


@asynccontextmanager
async def group_killed_at_exit(pgid: int) -> AsyncIterator[None]:
    """A test's own backstop: SIGKILL group `pgid` at the end, should the code under
    test have left it running."""
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


class NoPlatform:
    """A `TurnPort` that is never called: for turns built directly, which never post."""

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        raise AssertionError("not called")

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        raise AssertionError("not called")

    async def history(self) -> list[Message]:
        raise AssertionError("not called")

    async def participants(self) -> list[Participant]:
        raise AssertionError("not called")

    async def ask(self, question: Question) -> str:
        raise AssertionError("not called")

    def take_guidance(self) -> tuple[Message, ...]:
        return ()

    async def wait_guidance(self) -> None:
        raise AssertionError("not called")


HOST_TOKEN = "host-token-0123456789abcdef"
"""The bearer token the tests' hosts require (and their bridge targets send)."""


def envelope(
    platform: Platform, message_id: str, content: str = "hello", *, room_id: str | None = None
) -> dict[str, Any]:
    """A forwarded `message_created` for the seeded agent, by the seeded user, in the
    seeded room unless `room_id`, as the bridge sends it."""
    agent, room, user = seeded(platform)
    return {
        "event_type": "message_created",
        "agent_id": agent,
        "room_id": room_id or room,
        "payload": {
            "id": message_id,
            "content": content,
            "message_type": "text",
            "sender_type": "User",
            "sender_id": user,
            "inserted_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z",
        },
        "forwarded_at": "2026-12-01T00:00:00Z",
    }


class Command:
    """A `band-trio` process, and what it wrote to stderr so far."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.err = b""

    async def line(self, containing: str) -> str:
        """The first stderr line containing `containing` (the caller's deadline)."""
        assert self.process.stderr is not None
        while True:
            for line in self.err.decode(errors="replace").splitlines():
                if containing in line:
                    return line
            chunk = await self.process.stderr.receive_some()
            if not chunk:
                raise AssertionError(f"stderr ended without {containing!r}: {self.err!r}")
            self.err += chunk

    async def rest_of_stderr(self) -> bytes:
        """Everything it wrote to stderr, once it has closed it (exited)."""
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.receive_some():
            self.err += chunk
        return self.err

    async def stop(self) -> int:
        """SIGTERM, and the exit status (stderr read to its end meanwhile)."""
        self.process.send_signal(signal.SIGTERM)
        await self.rest_of_stderr()
        return await self.process.wait()


@asynccontextmanager
async def band_trio(
    *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> AsyncIterator[Command]:
    """`python -m band_trio ARGV...` (stdout piped too), killed by its own PID on the way
    out if it still runs."""
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "band_trio", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )
    try:
        yield Command(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def conformance(*argv: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """`python -m band_trio conformance ARGV...` in `cwd`, run to its end (the caller's
    deadline), its stdout and stderr captured."""
    return await trio.run_process(
        [sys.executable, "-m", "band_trio", "conformance", *argv],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=cwd,
    )


def bridge_config_out_of_reach(path: Path, policy: dict[str, Any] | None = None) -> Path:
    """A bridge config file (JSON) of one identity `a` whose platform and target are
    the discard port, where nothing listens: the run ends at once, every identity
    lost at start-up (exit 1)."""
    nowhere = "127.0.0.1:9"
    identity = {
        "agent_id": "a",
        "api_key": "k",
        "rest_url": f"http://{nowhere}",
        "ws_url": f"ws://{nowhere}/api/v1/socket/websocket",
        "target": {"type": "http", "url": f"http://{nowhere}/"},
    }
    data: dict[str, Any] = {"identity": [identity]}
    if policy is not None:
        data["bridge"] = {"policy": policy}
    path.write_text(json.dumps(data))
    return path


early_close = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpcore2._async.connection_pool.PoolByteStream.__aiter__'"
    " was garbage collected:ResourceWarning"
)
"""For a test that closes a stream early: httpcore2's pool leaves an async generator
to the collector then, which warns; the warning is that, not a leak of ours."""


def errors_posted(platform: Platform, room: str) -> list[str]:
    """The error events posted in `room` (a failed turn's words), in order."""
    return [e["content"] for e in platform.store.events(room) if e["message_type"] == "error"]


def settled(platform: Platform, message: str) -> bool:
    """Whether `message` has an outcome for the agent (processed or failed)."""
    return status(platform, message) in ("processed", "failed")


def tasks_for(peer: Any, text: str) -> list[str]:
    """The A2A peer's task ids started for the message `text`, in order."""
    return [e["task_id"] for e in peer.events("execute_started") if e["text"] == text]
