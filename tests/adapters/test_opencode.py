"""The OpenCode adapter against a real `opencode serve` 1.18.33, driven by a real agent.

Every test runs the embedded platform and an agent over loopback, a stubllm
0.1.5 subprocess as the model, and OpenCode (tests/peers/opencode.py, installed
by `python3 dev.py test`) between them, with stubllm as its provider `stub`.
That OpenCode really stopped its work is read on stubllm's side: its streaming
generator was cancelled because OpenCode closed the upstream request. When
OpenCode cannot be started the test fails, naming the fix; it never skips.
"""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest
import trio

from band_trio import StopOutcome, Turn
from band_trio.adapters._opencode import OpenCodeAdapter, OpenCodeError
from band_trio.adapters._opencode_config import opencode
from band_trio.contract import RemoteStop
from band_trio.errors import ConfigurationError
from band_trio.platform import Platform
from peers import Peer, shared_stubllm_peer
from peers.opencode import OpenCodePeer, opencode_peer
from support import client_sockets, replies, running_agent, status

DEADLINE = 40  # OpenCode's start (~3 s) and a slow answer included
SLOW = " ".join(f"w{i:02d}" for i in range(80))  # the "[slow]" fixture's answer
SLOW_CHUNK_MS = 50
"""stubllm's pace for "[slow]" where a stop must reach it mid-stream: 80 chunks, 4 s after
the third is seen, for the stop's way through the agent and the peer process to the
model call (at 10 ms the 0.8 s left could run out at a CI machine's load, and the
stream ended before the stop: no `stream_cancelled`, the test's deadline)."""


class Observed(OpenCodeAdapter):
    """The adapter, recording per message the remote stops of its turn (test only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stops: dict[str, tuple[RemoteStop, ...]] = {}
        self.cancelled_at: dict[str, float] = {}
        self._changed = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        try:
            await super().on_turn(turn)
        except trio.Cancelled:
            self.cancelled_at[turn.message.id] = time.perf_counter()
            raise
        finally:
            self.stops[turn.message.id] = turn.remote_stops
            self._changed.set()
            self._changed = trio.Event()

    async def settled(self, message: str) -> tuple[RemoteStop, ...]:
        while message not in self.stops:
            await self._changed.wait()
        return self.stops[message]


def adapter_for(peer: OpenCodePeer, **kwargs: Any) -> Observed:
    return Observed(peer.url, provider_id="stub", model_id="gpt-4o", **kwargs)


def seeded(platform: Platform) -> tuple[str, str, str]:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    return info.agent_id, info.room_id, info.user_id


def chat_requests(llm: Peer) -> list[dict[str, Any]]:
    """The bodies OpenCode sent to stubllm's /v1/chat/completions, in order."""
    return [e["body"] for e in llm.events("request") if e["path"] == "/v1/chat/completions"]


def said(body: dict[str, Any], role: str) -> list[str]:
    """The text of a request's messages of one role (string or list-of-parts content)."""
    texts = []
    for message in body["messages"]:
        if message["role"] != role:
            continue
        content = message["content"]
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        texts.append(str(content))
    return texts


async def opencode_messages(peer: OpenCodePeer, session: str) -> list[dict[str, Any]]:
    async with httpx2.AsyncClient(base_url=peer.url, auth=peer.auth) as client:
        response = await client.get(f"/session/{session}/message")
        response.raise_for_status()
        messages: list[dict[str, Any]] = response.json()
        return messages


# -- answers ------------------------------------------------------------------------


@pytest.mark.long(16)
async def test_a_prompt_is_answered_and_the_rooms_session_is_reused(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with (
            shared_stubllm_peer() as llm,
            opencode_peer(llm.base_url, password="s3cret-pw") as peer,
        ):
            adapter = adapter_for(peer, password="s3cret-pw")
            async with running_agent(platform, adapter):
                first = platform.post_message(room, user, "[quick] one")
                await platform.wait_until(lambda: status(platform, first) == "processed")
                session = adapter.session(room)
                assert client_sockets(peer.port) in (0, None)  # the turn's client is closed
                second = platform.post_message(room, user, "[quick] two")
                await platform.wait_until(lambda: status(platform, second) == "processed")
                assert adapter.session(room) == session
            history = await opencode_messages(peer, session or "")
            requests = chat_requests(llm)
    assert replies(platform, room) == ["quick answer", "quick answer"]
    assert session and session.startswith("ses_")
    assert adapter.stops[first] == adapter.stops[second] == ()  # ended on their own
    # one OpenCode session holds the conversation: the second request carries the first
    assert len(requests) == 2
    assert said(requests[1], "user") == ["[quick] one", "[quick] two"]
    assert said(requests[1], "assistant") == ["quick answer"]
    assert requests[0]["model"] == "gpt-4o" and requests[0]["stream"] is True
    assert [m["info"]["role"] for m in history] == ["user", "assistant", "user", "assistant"]


@pytest.mark.long(16)
async def test_a_model_that_keeps_failing_fails_the_message_and_is_aborted(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as llm, opencode_peer(llm.base_url) as peer:
            adapter = adapter_for(peer, max_retries=0)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[error] please")
                await platform.wait_until(lambda: status(platform, message) == "failed")
                [stop] = await adapter.settled(message)
    assert replies(platform, room) == []
    # OpenCode would retry a 500 with backoff for minutes: the turn failed and the stop ended
    # it; aborted while waiting to retry, OpenCode reports no MessageAbortedError, only idle
    assert (stop.outcome, stop.detail) == (StopOutcome.CONFIRMED, "session idle")


# -- aborts -------------------------------------------------------------------------


@pytest.mark.long(13)
async def test_interrupt_mid_answer_aborts_opencode_and_its_model_stream(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with (
            shared_stubllm_peer(chunk_delay_ms=SLOW_CHUNK_MS) as llm,
            opencode_peer(llm.base_url) as peer,
        ):
            adapter = adapter_for(peer)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await llm.wait_for(lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk")
                sent = time.perf_counter()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                cancelled = await llm.wait_for(event="stream_cancelled", timeout=DEADLINE)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                [stop] = await adapter.settled(message)
                stats = running.agent.remote_stops
                session = adapter.session(room)
                assert client_sockets(peer.port) in (0, None)
            assert adapter.session(room) is None  # forgotten when the agent left the room
            history = await opencode_messages(peer, session or "")
            assert llm.find(event="stream_completed") is None
    assert cancelled["how"] == "cancelled" and cancelled["count"] < 80
    assert replies(platform, room) == []  # nothing posted for the interrupted message
    assert (stop.name, stop.outcome) == ("opencode session", StopOutcome.CONFIRMED)
    assert stop.detail == "session.error MessageAbortedError"
    assert stop.handle == session
    assert stats.confirmed >= 1
    # OpenCode keeps the partial answer in its own history, marked aborted
    assert history[-1]["info"]["error"]["name"] == "MessageAbortedError"
    print(
        f"\ninterrupt -> adapter Cancelled {1000 * (adapter.cancelled_at[message] - sent):.1f} ms,"
        f" -> stubllm stream cancelled {1000 * (cancelled['perf'] - sent):.1f} ms,"
        f" stop took {1000 * stop.took:.1f} ms"
    )


@pytest.mark.long(14)
async def test_stop_keeps_the_message_and_play_answers_it_in_the_same_session(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with (
            shared_stubllm_peer(chunk_delay_ms=SLOW_CHUNK_MS) as llm,
            opencode_peer(llm.base_url) as peer,
        ):
            adapter = adapter_for(peer)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await llm.wait_for(lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk")
                platform.send_control(agent_id, "stop", room_id=room, reason="not now")
                cancelled = await llm.wait_for(event="stream_cancelled", timeout=DEADLINE)
                [stop] = await adapter.settled(message)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                await trio.testing.wait_all_tasks_blocked()
                assert status(platform, message) == "processing"
                assert replies(platform, room) == []
                session = adapter.session(room)
                platform.send_control(agent_id, "play", room_id=room)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                assert adapter.session(room) == session
            first, replay = chat_requests(llm)
    assert cancelled["req"] == 1
    assert stop.outcome is StopOutcome.CONFIRMED
    assert replies(platform, room) == [SLOW]
    # the replay is the same message again, in the same session, told why it was cut off
    assert said(first, "user") == ["[slow] count"]
    assert said(replay, "user") == ["[slow] count", "[slow] count"]
    [system] = said(replay, "system")
    assert "stopped by the user (reason: not now)" in system
    assert "answer the message again" in system
    assert "stopped by the user" not in said(first, "system")[0]


# -- configuration ------------------------------------------------------------------


def test_the_factory_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("URL", "MODEL", "PASSWORD", "DIRECTORY", "PERMISSIONS"):
        monkeypatch.delenv(f"BAND_OPENCODE_{name}", raising=False)
    with pytest.raises(ConfigurationError, match="BAND_OPENCODE_URL is not set"):
        opencode()
    monkeypatch.setenv("BAND_OPENCODE_URL", "http://127.0.0.1:4096/")
    for bad in ("", "gpt-4o", "stub/", "/gpt-4o"):
        monkeypatch.setenv("BAND_OPENCODE_MODEL", bad)
        with pytest.raises(ConfigurationError, match="BAND_OPENCODE_MODEL must be provider/model"):
            opencode()
    monkeypatch.setenv("BAND_OPENCODE_MODEL", "openrouter/anthropic/claude-sonnet-4")
    monkeypatch.setenv("BAND_OPENCODE_PASSWORD", "pw")
    monkeypatch.setenv("BAND_OPENCODE_DIRECTORY", "/srv/project")
    adapter = opencode()
    assert adapter.base_url == "http://127.0.0.1:4096"
    assert adapter.model == {"providerID": "openrouter", "modelID": "anthropic/claude-sonnet-4"}
    assert adapter.auth == ("opencode", "pw")
    assert adapter.params == {"directory": "/srv/project"}
    assert adapter.permissions == "ask"  # the room is asked unless configured otherwise
    monkeypatch.setenv("BAND_OPENCODE_PERMISSIONS", " deny ")
    assert opencode().permissions == "deny"
    monkeypatch.setenv("BAND_OPENCODE_PERMISSIONS", "allow")
    with pytest.raises(
        ConfigurationError, match=r"^BAND_OPENCODE_PERMISSIONS: permissions must be one of ask"
    ):
        opencode()
    monkeypatch.delenv("BAND_OPENCODE_PERMISSIONS")
    monkeypatch.setenv("BAND_OPENCODE_URL", "127.0.0.1:4096")
    with pytest.raises(ConfigurationError, match=r"^BAND_OPENCODE_URL: OpenCode URL must be"):
        opencode()
    assert issubclass(OpenCodeError, Exception)
