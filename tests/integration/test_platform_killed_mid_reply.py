"""The platform as a process of its own, killed (`kill -9`) or frozen (`SIGSTOP`) while
the agent's reply is on its way: the reply lands once, the message ends `processed`,
and an agent restart changes nothing.

The agent runs here; `band-trio platform --db` runs in a subprocess, restarted on the
same port and file after a kill, as an operator's supervisor would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from band_trio import Agent, Policy, Turn
from band_trio.testing import RecordingAdapter
from ports import free_port

DEADLINE = 60
POLL = 0.02
"""Another process's state is read over its admin API; this often while waiting."""
FAST = Policy(
    rest_retry_base=0.05,
    post_retry_cap=0.3,
    reconnect_base=0.05,
    reconnect_cap=0.3,
    request_deadline=2.0,
    heartbeat_interval=0.5,
    heartbeat_dead_after=1.5,
)


class PlatformProcess:
    """`band-trio platform --db DB --port PORT` in a subprocess, started and restarted."""

    def __init__(self, db: Path, port: int, ready: Path) -> None:
        self.db, self.port, self.ready = db, port, ready
        self.process: trio.Process | None = None
        self.info: dict[str, Any] = {}

    async def start(self, *, seed: bool) -> None:
        self.ready.unlink(missing_ok=True)  # a killed platform's file is stale
        argv = [sys.executable, "-m", "band_trio", "platform", "--db", str(self.db)]
        argv += ["--port", str(self.port), "--ready-file", str(self.ready)]
        with trio.CancelScope(shield=True):  # spawned and recorded, or neither
            self.process = await trio.lowlevel.open_process(
                [*argv, *(["--seed"] if seed else [])], stderr=subprocess.DEVNULL
            )
        while not self.ready.exists():
            assert self.process.poll() is None, "the platform exited at start-up"
            await trio.sleep(POLL)
        self.info = json.loads(self.ready.read_text()) | (self.info if not seed else {})

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        await self.process.wait()

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        os.kill(self.process.pid, sig)

    async def admin(self, method: str, path: str, **kwargs: Any) -> Any:
        async with httpx2.AsyncClient(base_url=self.info["admin_url"], timeout=10) as client:
            answer = await client.request(method, path, **kwargs)
            answer.raise_for_status()
            return answer.json()

    async def status(self, message_id: str) -> str | None:
        found = await self.admin("GET", f"/messages/{message_id}")
        entry = found["delivery"].get(self.info["agent_id"])
        return None if entry is None else str(entry["status"])

    async def replies(self) -> list[str]:
        listed = await self.admin("GET", f"/rooms/{self.info['room_id']}/messages")
        return [m["content"] for m in listed if m["sender_id"] == self.info["agent_id"]]

    async def post(self, content: str) -> str:
        room, user = self.info["room_id"], self.info["user_id"]
        body = {"sender_id": user, "content": content}
        created = await self.admin("POST", f"/rooms/{room}/messages", json=body)
        return str(created["id"])

    async def wait_for(self, check: Callable[[], Any]) -> None:
        while not await check():
            await trio.sleep(POLL)

    async def wait_processed(self, message_id: str) -> None:
        while await self.status(message_id) != "processed":
            await trio.sleep(POLL)


@asynccontextmanager
async def platform_process(tmp_path: Path) -> AsyncIterator[PlatformProcess]:
    platform = PlatformProcess(tmp_path / "band.db", free_port(), tmp_path / "ready.json")
    try:
        await platform.start(seed=True)
        yield platform
    finally:
        if platform.process is not None and platform.process.returncode is None:
            platform.process.send_signal(signal.SIGCONT)  # a frozen one cannot die of TERM
            with trio.CancelScope(shield=True):  # reaped, even when the test was cut off
                await platform.kill()


@asynccontextmanager
async def agent_of(platform: PlatformProcess, adapter: RecordingAdapter) -> AsyncIterator[Agent]:
    info = platform.info
    agent = Agent(
        adapter, agent_id=info["agent_id"], api_key=info["api_key"], rest_url=info["rest_url"],
        ws_url=info["ws_url"], policy=FAST,
    )  # fmt: skip
    async with trio.open_nursery() as nursery:
        await nursery.start(agent.run)
        try:
            yield agent
        finally:
            with trio.fail_after(10):
                await agent.stop()


@asynccontextmanager
async def about_to_reply(platform: PlatformProcess) -> AsyncIterator[tuple[str, trio.Event]]:
    """An agent of the platform whose turn for a posted "hello" waits, just before its
    reply, for the event yielded with the message's id; the agent stopped at the end."""
    gate, reached = trio.Event(), trio.Event()

    async def behaviour(turn: Turn) -> None:
        reached.set()
        await gate.wait()
        await turn.reply(f"echo: {turn.message.content}")

    async with agent_of(platform, RecordingAdapter(behaviour)):
        message = await platform.post("hello")
        await reached.wait()
        yield message, gate


@pytest.mark.long(15)
@pytest.mark.rotated  # one a run, the day's: the in-process drop tests hold both each run
@pytest.mark.parametrize("stored", [False, True], ids=["unstored", "stored"])
async def test_kill_9_of_the_platform_mid_reply_then_a_restart(
    tmp_path: Path, stored: bool
) -> None:
    """Held (received, not stored) or dropped (stored, unanswered), then killed: after
    the platform's restart on the same file the reply is there once, the message
    `processed`; an agent restart answers nothing again."""
    with trio.fail_after(DEADLINE):
        async with platform_process(tmp_path) as platform:
            async with about_to_reply(platform) as (message, gate):
                room = platform.info["room_id"]
                if stored:
                    drop = {"route": "post_message", "drop": True, "room_id": room}
                    await platform.admin("POST", "/faults/rest", json=drop)
                else:
                    hold = {"route": "post_message", "room_id": room}
                    await platform.admin("POST", "/faults/hold", json=hold)
                gate.set()

                async def reply_reached() -> bool:
                    stats = await platform.admin("GET", "/stats")
                    return bool(stats["faults_rest_dropped"] + stats["faults_rest_held"])

                await platform.wait_for(reply_reached)
                await platform.kill()
                await platform.start(seed=False)

                await platform.wait_processed(message)
            assert await platform.replies() == ["echo: hello"]
            again = RecordingAdapter()
            async with agent_of(platform, again):
                later = await platform.post("later")

                await platform.wait_processed(later)
            assert again.calls == ["later"]
            assert await platform.replies() == ["echo: hello", "echo: later"]


@pytest.mark.long(15)
async def test_a_platform_frozen_past_its_deadlines_mid_reply_answers_once(
    tmp_path: Path,
) -> None:
    """SIGSTOP while the reply is posted: its request times out (`request_deadline`),
    the heartbeat declares the socket dead, the agent's looks at the room time out;
    at SIGCONT the platform handles the old request and the new ones in whatever
    order, and the reply is there once."""
    with trio.fail_after(DEADLINE):
        async with platform_process(tmp_path) as platform:
            async with about_to_reply(platform) as (message, gate):
                platform.signal(signal.SIGSTOP)
                gate.set()
                await trio.sleep(6)  # the freeze itself: past every deadline of FAST
                platform.signal(signal.SIGCONT)

                await platform.wait_processed(message)
            assert await platform.replies() == ["echo: hello"]
