"""The Anthropic adapter, on the official `anthropic` SDK, against a real stubllm server,
driven by a real agent.

No bridge: the SDK (anyio) runs under the agent's trio run as it is. Every test runs
the embedded platform and an agent over loopback, and a stubllm 0.1.5 subprocess whose
`/v1/messages` route speaks Anthropic's Messages stream (bench/_peers/stubllm_anthropic.py):
what the model received and whether its streaming generator was cancelled are the
server's own records (`peer.events(...)`), not inferences from the client.
"""

from __future__ import annotations

import time
from typing import Any

import trio

from band_trio import Policy, StopOutcome, Turn, UpstreamPolicy
from band_trio.adapters import AnthropicAdapter, Tool
from band_trio.contract import LastAbort, RemoteStop, not_run_note
from band_trio.platform import Platform
from band_trio.testing import transcript_problems
from peers import Peer, shared_stubllm_peer
from support import client_sockets, early_close, replies, running_agent, seeded, status

DEADLINE = 20
SLOW = " ".join(f"w{i:02d}" for i in range(80))  # the "[slow]" fixture's answer
FAST = Policy(upstream=UpstreamPolicy(retry_base=0.05, retry_cap=0.2))


class Observed(AnthropicAdapter):
    """The adapter, recording per message what its turn saw (for the test only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{"api_key": "sk-test", **kwargs})
        self.last_aborts: dict[str, list[LastAbort | None]] = {}
        self.stops: dict[str, tuple[RemoteStop, ...]] = {}
        self.cancelled_at: dict[str, float] = {}
        self._changed = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        self.last_aborts.setdefault(turn.message.id, []).append(turn.last_abort)
        try:
            await super().on_turn(turn)
        except trio.Cancelled:
            self.cancelled_at[turn.message.id] = time.perf_counter()
            raise
        finally:
            self.stops[turn.message.id] = turn.remote_stops
            self._changed.set()
            self._changed = trio.Event()

    async def wait_for(self, predicate: Any) -> None:
        while not predicate():
            await self._changed.wait()


def message_requests(peer: Peer) -> list[dict[str, Any]]:
    """The bodies stubllm received on /v1/messages, in order."""
    return [e["body"] for e in peer.events("request") if e["path"] == "/v1/messages"]


def tool_results(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (block["tool_use_id"], block["content"])
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def assert_alternates(messages: list[dict[str, Any]]) -> None:
    """What the Messages API accepts: user first, then the roles alternate, and every
    tool_use is answered once in the next message."""
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2) + [
        "user"
    ] * (len(messages) % 2), messages
    assert transcript_problems(messages) == [], messages


def processed(platform: Platform, message: str) -> Any:
    return lambda: status(platform, message) == "processed"


# -- answers ------------------------------------------------------------------------


async def test_a_streamed_answer_is_posted_and_the_message_processed(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.url, "claude-sonnet-4-6", system="be brief", max_tokens=99)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[quick] hello")
                await platform.wait_until(processed(platform, message))
                assert client_sockets(peer.port) in (0, None)  # the turn's client is closed
                kept = adapter.history(room)
            [body] = message_requests(peer)
            await peer.wait_for(event="stream_completed", req=1)
    assert replies(platform, room) == ["quick answer"]
    assert (body["model"], body["max_tokens"], body["stream"]) == ("claude-sonnet-4-6", 99, True)
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "[quick] hello"}]
    assert "tools" not in body
    assert adapter.stops[message] == ()  # the stream ended on its own: nothing to stop
    assert kept == [
        {"role": "user", "content": "[quick] hello"},
        {"role": "assistant", "content": "quick answer"},
    ]


async def test_tool_use_runs_in_order_and_the_model_is_asked_again(platform: Platform) -> None:
    _, room, user = seeded(platform)
    seen: list[dict[str, Any]] = []

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        seen.append(arguments)
        return f"found {arguments['query']}"

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.url, "claude-sonnet-4-6", tools=[tool])
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[blocks] both")
                await platform.wait_until(processed(platform, message))
            first, second = message_requests(peer)
    assert seen == [{"query": "a"}, {"query": "b"}]
    assert first["tools"] == [
        {"name": "lookup", "description": "Look something up.", "input_schema": {"type": "object"}}
    ]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look both up."},
                {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"query": "a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {"query": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "found a"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "found b"},
            ],
        },
    ]
    assert replies(platform, room) == ["both tools answered"]


async def test_an_error_status_is_retried_then_fails_the_message_and_leaves_no_history(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.url, "claude-sonnet-4-6")
            async with running_agent(platform, adapter, policy=FAST):
                message = platform.post_message(room, user, "[error] please")
                await platform.wait_until(lambda: status(platform, message) == "failed")
                assert adapter.history(room) == []
            # band-trio's retries, not the SDK's (max_retries=0): UpstreamPolicy.attempts
            assert len(message_requests(peer)) == 3
    assert replies(platform, room) == []


# -- aborts -------------------------------------------------------------------------


@early_close
async def test_interrupt_mid_stream_cancels_the_servers_generator(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=50) as peer:
            adapter = Observed(peer.url, "claude-sonnet-4-6")
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await peer.wait_for(lambda e: e["count"] >= 6, timeout=DEADLINE, event="chunk")
                sent = time.perf_counter()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                cancelled = await peer.wait_for(event="stream_cancelled", timeout=DEADLINE)
                await platform.wait_until(processed(platform, message))
                await adapter.wait_for(lambda: message in adapter.stops)
                stats = running.agent.remote_stops
                assert client_sockets(peer.port) in (0, None)
            assert peer.find(event="stream_completed") is None
    assert cancelled["how"] == "cancelled" and cancelled["count"] < 80
    assert replies(platform, room) == []  # nothing posted for the interrupted message
    [stop] = adapter.stops[message]
    assert (stop.name, stop.outcome) == ("messages stream", StopOutcome.REQUESTED)
    assert stop.handle == f"POST {peer.url}v1/messages"
    assert stats.requested >= 1
    print(
        f"\ninterrupt -> adapter Cancelled {1000 * (adapter.cancelled_at[message] - sent):.1f} ms,"
        f" -> server generator cancelled {1000 * (cancelled['perf'] - sent):.1f} ms"
    )


@early_close
async def test_stop_mid_stream_keeps_the_message_and_play_answers_it(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=10) as peer:
            adapter = Observed(peer.url, "claude-sonnet-4-6")
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await peer.wait_for(lambda e: e["count"] >= 6, timeout=DEADLINE, event="chunk")
                platform.send_control(agent_id, "stop", room_id=room, reason="not now")
                cancelled = await peer.wait_for(event="stream_cancelled", timeout=DEADLINE)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert status(platform, message) == "processing"
                platform.send_control(agent_id, "play", room_id=room)
                await platform.wait_until(processed(platform, message))
            first, replay = message_requests(peer)
    assert cancelled["req"] == 1
    assert replies(platform, room) == [SLOW]  # every token, none dropped
    assert adapter.last_aborts[message][1] == LastAbort("stop", "not now", message)
    assert first["messages"] == [{"role": "user", "content": "[slow] count"}]
    # the replayed message is asked once, with a note that the first answer was stopped
    [asked] = replay["messages"]
    assert asked["role"] == "user"
    text, note = (block["text"] for block in asked["content"])
    assert text == "[slow] count"
    assert "stopped by the user (reason: not now)" in note
    assert "answer the message again" in note


@early_close
async def test_interrupt_during_tool_use_leaves_a_valid_transcript_and_says_why(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    started = trio.Event()
    ran: list[str] = []

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        ran.append(arguments["query"])
        if arguments["query"] == "b":
            started.set()
            await trio.sleep_forever()  # a slow tool, awaiting something that never comes
        return "found"

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.url, "claude-sonnet-4-6", tools=[tool])
            async with running_agent(platform, adapter):
                asked = platform.post_message(room, user, "[tools2] look both up")
                await started.wait()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="wrong question")
                await platform.wait_until(processed(platform, asked))
                later = platform.post_message(room, user, "[quick] something else")
                await platform.wait_until(processed(platform, later))
                kept = adapter.history(room)
            body = message_requests(peer)[-1]
    assert ran == ["a", "b"]
    messages = body["messages"]
    assert_alternates(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    # "a" ran: its result stays; "b" was cut off: closed as not run, saying why
    assert tool_results(messages[2]) == [
        ("call_a", "found"),
        ("call_b", not_run_note("interrupt", "wrong question")),
    ]
    texts = [block["text"] for block in messages[2]["content"] if block["type"] == "text"]
    note, question = texts
    assert "interrupted by the user (reason: wrong question)" in note
    assert "'not run' did not run" in note
    assert question == "[quick] something else"
    assert adapter.last_aborts[later] == [LastAbort("interrupt", "wrong question", asked)]
    assert len(replies(platform, room)) == 1  # only the later message was answered
    assert_alternates(kept)


@early_close
async def test_interrupt_mid_stream_after_a_tool_ran_keeps_the_result_not_the_words(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        return "sunny"

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=10) as peer:
            adapter = Observed(peer.url, "claude-sonnet-4-6", tools=[tool])
            async with running_agent(platform, adapter):
                asked = platform.post_message(room, user, "[tool-slow] weather")
                await peer.wait_for(
                    lambda e: e["count"] >= 6, timeout=DEADLINE, event="chunk", req=2
                )
                platform.send_control(agent_id, "interrupt", room_id=room)
                await peer.wait_for(event="stream_cancelled", req=2, timeout=DEADLINE)
                await platform.wait_until(processed(platform, asked))
                later = platform.post_message(room, user, "[quick] and now?")
                await platform.wait_until(processed(platform, later))
            body = message_requests(peer)[-1]
    use = {"type": "tool_use", "id": "call_lookup_2", "name": "lookup", "input": {"query": "slow"}}
    messages = body["messages"]
    assert_alternates(messages)
    assert messages[:2] == [
        {"role": "user", "content": "[tool-slow] weather"},
        {"role": "assistant", "content": [use]},
    ]
    # the words streamed before the interrupt were never posted: not kept
    result, note, question = messages[2]["content"]
    assert result == {"type": "tool_result", "tool_use_id": "call_lookup_2", "content": "sunny"}
    assert "interrupted by the user before" in note["text"]
    assert question == {"type": "text", "text": "[quick] and now?"}
