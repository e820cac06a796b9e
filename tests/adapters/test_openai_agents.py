"""The OpenAI Agents SDK adapter, with a real `Agent` (its Chat Completions model, a function
tool) against a real stubllm server, driven by an agent on the embedded platform.

stubllm serves Chat Completions only (no `/v1/responses`), so the agent's model is the
SDK's `OpenAIChatCompletionsModel`. Its trace export is off (the adapter's default): no
run of these tests calls out to OpenAI.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import trio

from band_trio import StopOutcome
from band_trio.errors import ConfigurationError
from band_trio.platform import Platform
from frameworks import TOOLS, Watched, agents_adapter
from peers import Peer, shared_stubllm_peer
from support import early_close, replies, running_agent, seeded, status

DEADLINE = 20
SLOW = " ".join(f"w{i:02d}" for i in range(80))  # the "[slow]" fixture's answer


def chat_requests(peer: Peer) -> list[list[dict[str, Any]]]:
    return [
        e["body"]["messages"] for e in peer.events("request") if e["path"] == "/v1/chat/completions"
    ]


def tool_events(platform: Platform) -> list[tuple[str, str]]:
    posted = [
        json.loads(e.body)["event"]
        for e in platform.log()
        if e.kind == "rest" and e.path and e.path.endswith("/events") and e.body
    ]
    return [(e["message_type"], e["content"]) for e in posted]


async def test_an_agent_answers_from_the_rooms_conversation(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Watched(agents_adapter(peer.base_url))
            async with running_agent(platform, adapter):
                first = platform.post_message(room, user, "[quick] hello")
                await platform.wait_until(lambda: status(platform, first) == "processed")
                second = platform.post_message(room, user, "[quick] again")
                await platform.wait_until(lambda: status(platform, second) == "processed")
            asked = chat_requests(peer)
    assert replies(platform, room) == ["quick answer", "quick answer"]
    system = {"role": "system", "content": "Answer briefly."}
    assert asked[0] == [system, {"role": "user", "content": "[quick] hello"}]
    assert asked[1] == [
        system,
        {"role": "user", "content": "[quick] hello"},
        {"role": "assistant", "content": "quick answer"},
        {"role": "user", "content": "[quick] again"},
    ]
    assert adapter.stops[first] == ()


async def test_function_tools_are_posted_as_events_and_the_final_output_as_the_reply(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    TOOLS.arm(work=0)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = agents_adapter(peer.base_url)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[tool] weather?")
                await platform.wait_until(lambda: status(platform, message) == "processed")
    assert TOOLS.events == ["started", "finished"]
    assert tool_events(platform) == [
        ("tool_call", 'lookup({"query": "weather"})'),
        ("tool_result", "sunny (weather)"),
    ]
    assert replies(platform, room) == ["the tool said: sunny"]


async def test_a_run_that_fails_fails_the_message(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = agents_adapter(peer.base_url)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[error] please")
                await platform.wait_until(lambda: status(platform, message) == "failed")
    assert replies(platform, room) == []


def test_tracing_export_is_off_unless_asked_for() -> None:
    from agents import RunConfig

    url = "http://127.0.0.1:9/v1"
    assert agents_adapter(url).run_config.tracing_disabled
    mine = RunConfig(workflow_name="mine")
    kept = agents_adapter(url, run_config=mine, tracing=True).run_config
    assert kept is mine and not kept.tracing_disabled
    off = agents_adapter(url, run_config=mine).run_config
    assert off.tracing_disabled and off.workflow_name == "mine" and not mine.tracing_disabled


def test_the_final_output_is_posted_as_text() -> None:
    from band_trio.adapters import OpenAIAgentsError
    from band_trio.adapters._openai_agents import _answer

    assert _answer("done") == "done"
    assert _answer({"temperature": 21}) == '{"temperature": 21}'
    for empty in (None, "", "  "):
        with pytest.raises(OpenAIAgentsError, match="no final output"):
            _answer(empty)


# -- aborts -------------------------------------------------------------------------------


@early_close
@pytest.mark.parametrize("signal", ["interrupt", "stop"])
async def test_an_abort_mid_stream_closes_the_models_stream(
    platform: Platform, signal: str
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=20) as peer:
            adapter = Watched(agents_adapter(peer.base_url))
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await peer.wait_for(lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk")
                sent = time.perf_counter()
                platform.send_control(agent_id, signal, room_id=room, reason="enough")  # type: ignore[arg-type]
                cancelled = await peer.wait_for(event="stream_cancelled", timeout=DEADLINE)
                await adapter.wait_for(lambda: message in adapter.stops)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert status(platform, message) == (
                    "processed" if signal == "interrupt" else "processing"
                )
                if signal == "stop":  # play: the message is answered, once
                    platform.send_control(agent_id, "play", room_id=room)
                    await platform.wait_until(lambda: status(platform, message) == "processed")
            assert [e["req"] for e in peer.events("stream_completed")] == (
                [] if signal == "interrupt" else [2]
            )
    assert cancelled["req"] == 1 and cancelled["how"] == "cancelled"
    assert replies(platform, room) == ([] if signal == "interrupt" else [SLOW])
    [stop] = adapter.turns[message][0]  # after a stop, the replay ran to its end
    assert (stop.name, stop.outcome) == ("asyncio task", StopOutcome.CONFIRMED)
    print(f"\n{signal} -> server generator cancelled {1000 * (cancelled['perf'] - sent):.1f} ms")


@early_close
@pytest.mark.parametrize("signal", ["interrupt", "stop"])
async def test_a_function_tool_running_at_the_abort_is_cancelled_and_waited_for(
    platform: Platform, signal: str
) -> None:
    agent_id, room, user = seeded(platform)
    TOOLS.arm()
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Watched(agents_adapter(peer.base_url))
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[tool] weather?")
                await TOOLS.started.wait()
                platform.send_control(agent_id, signal, room_id=room)  # type: ignore[arg-type]
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                # the turn ended once the tool had: its cancel was taken, not abandoned
                assert TOOLS.events == ["started", "cancelled"]
                if signal == "interrupt":
                    await platform.wait_until(lambda: status(platform, message) == "processed")
    [stop] = adapter.stops[message]
    assert (stop.name, stop.outcome) == ("asyncio task", StopOutcome.CONFIRMED)
    assert tool_events(platform) == [("tool_call", 'lookup({"query": "weather"})')]
    assert replies(platform, room) == []


# -- configuration ------------------------------------------------------------------------


def test_the_agent_is_named_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from band_trio.adapters import openai_agents

    monkeypatch.setenv("FRAMEWORKS_MODEL_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BAND_OPENAI_AGENTS_AGENT", "frameworks:agent")
    monkeypatch.delenv("BAND_OPENAI_AGENTS_TRACING", raising=False)
    adapter = openai_agents()
    assert adapter.agent.name == "weather" and adapter.run_config.tracing_disabled
    monkeypatch.setenv("BAND_OPENAI_AGENTS_TRACING", "yes")
    assert not openai_agents().run_config.tracing_disabled


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("BAND_OPENAI_AGENTS_AGENT", "", "BAND_OPENAI_AGENTS_AGENT is not set"),
        ("BAND_OPENAI_AGENTS_AGENT", "frameworks:TOOLS", "not an OpenAI Agents SDK Agent"),
        ("BAND_OPENAI_AGENTS_AGENT", "frameworks:nothing", "cannot load"),
        ("BAND_OPENAI_AGENTS_TRACING", "maybe", "BAND_OPENAI_AGENTS_TRACING must be yes or no"),
    ],
)
def test_a_missing_or_bad_setting_is_a_one_line_configuration_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv("FRAMEWORKS_MODEL_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BAND_OPENAI_AGENTS_AGENT", "frameworks:agent")
    from band_trio.adapters import openai_agents

    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=says) as caught:
        openai_agents()
    assert "\n" not in str(caught.value)
