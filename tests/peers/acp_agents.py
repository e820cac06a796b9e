"""ACP agents as local test peers: the tests' own (built on the `agent-client-protocol` SDK,
tests/peers/acp_agent.py) and OpenCode's (`opencode acp`, with stubllm as its model).

    from peers.acp_agents import sdk_agent_config, opencode_acp_config, AgentEvents

    config = sdk_agent_config(tmp_path)                  # AcpConfig: the SDK agent
    events = AgentEvents(tmp_path)                       # what it recorded
    await events.wait_for(event="cancel", timeout=10)

    async with stubllm_peer() as llm:
        with opencode_acp_config(llm, tmp_path) as config:   # OpenCode, isolated
            ...

Neither is imported into the test process: the adapter starts each as its command
(`AcpConfig.command`), as `BAND_ACP_COMMAND` would name it. OpenCode runs through
`env -i` with the isolated layout of tests/peers/opencode.py (its own HOME and XDG
folders, stubllm as the provider `stub`, nothing of the caller's keys), and `acp
--pure`; its tool permissions are set to `ask`, so each one comes to the adapter.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

from band_trio import Turn
from band_trio.adapters import AcpAdapter, AcpConfig
from band_trio.bench._opencode_home import opencode_home
from band_trio.contract import RemoteStop
from band_trio.platform import Platform

from .fixtures import POLL_INTERVAL, Peer, PeerError
from .opencode import opencode_binary

SCRIPT = Path(__file__).with_name("acp_agent.py")


class Observed(AcpAdapter):
    """The adapter, recording per message the remote stops of its turn (test only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stops: dict[str, tuple[RemoteStop, ...]] = {}
        self._changed = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        try:
            await super().on_turn(turn)
        finally:
            self.stops[turn.message.id] = turn.remote_stops
            self._changed.set()
            self._changed = trio.Event()

    async def settled(self, message: str) -> tuple[RemoteStop, ...]:
        while message not in self.stops:
            await self._changed.wait()
        return self.stops[message]


def events_posted(platform: Platform, room: str) -> list[tuple[str, str]]:
    return [
        (e["message_type"], e["content"])
        for e in platform.store.events(room)
        if e["message_type"] in ("tool_call", "tool_result")
    ]


def sdk_agent_config(workdir: Path, *args: str, **overrides: Any) -> AcpConfig:
    """Settings for the SDK-built test agent, working (and recording) in `workdir`."""
    settings: dict[str, Any] = {
        "command": (sys.executable, str(SCRIPT), *args),
        "working_directory": str(workdir),
        "start_deadline": 20.0,
        "kill_grace": 1.0,
    }
    return AcpConfig(**{**settings, **overrides})


class AgentEvents:
    """What the SDK test agent recorded in its working directory (every process of it)."""

    def __init__(self, workdir: Path) -> None:
        self.path = workdir / "acp-agent.events.jsonl"

    def all(self, **match: Any) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if all(e.get(k) == v for k, v in match.items())]

    async def wait_for(
        self,
        *,
        timeout: float,  # noqa: ASYNC109 (as Peer.wait_for: the peers' helpers' API)
        **match: Any,
    ) -> dict[str, Any]:
        with trio.move_on_after(timeout):
            while True:
                found = self.all(**match)
                if found:
                    return found[0]
                await trio.sleep(POLL_INTERVAL)
        raise PeerError(f"the test agent recorded no {match} within {timeout} s: {self.all()}")


@contextmanager
def opencode_acp_config(llm: Peer, **overrides: Any) -> Iterator[AcpConfig]:
    """Settings for `opencode acp --pure` with `llm` (a stubllm peer) as its model, in an
    isolated layout removed after the block (the adapter ends the process before)."""
    root = Path(tempfile.mkdtemp(prefix="band-trio-opencode-acp-"))
    try:
        asked = {"bash": "ask", "edit": "ask", "webfetch": "ask"}
        env = opencode_home(root, llm.base_url, "gpt-4o", permission=asked)
        command = (
            "env",
            "-i",
            *(f"{name}={value}" for name, value in env.items()),
            str(opencode_binary()),
            "acp",
            "--pure",
        )
        settings_ = {
            "command": command,
            "working_directory": str(root / "project"),
            "start_deadline": 60.0,
            "kill_grace": 2.0,
        }
        yield AcpConfig(**{**settings_, **overrides})
    finally:
        shutil.rmtree(root, ignore_errors=True)
