"""The LangGraph adapter, with a real graph (langchain-openai's model, a tool node) against a
real stubllm server, driven by an agent on the embedded platform.

What the model received and whether its stream was cancelled are stubllm's own records
(`peer.events(...)`); what the tool did, the tool's (tests/frameworks.py, `TOOLS`).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import trio

from band_trio import StopOutcome
from band_trio.contract import not_run_note
from band_trio.errors import ConfigurationError
from band_trio.platform import Platform
from frameworks import TOOLS, Watched, graph_adapter
from peers import Peer, shared_stubllm_peer
from support import early_close, replies, running_agent, seeded, status

DEADLINE = 20
SLOW = " ".join(f"w{i:02d}" for i in range(80))  # the "[slow]" fixture's answer


def chat_requests(peer: Peer) -> list[list[dict[str, Any]]]:
    """The conversations stubllm was sent, in order."""
    return [
        e["body"]["messages"] for e in peer.events("request") if e["path"] == "/v1/chat/completions"
    ]


def tool_events(platform: Platform) -> list[tuple[str, str]]:
    """The (type, content) of the tool events the agent posted, in order."""
    posted = [
        json.loads(e.body)["event"]
        for e in platform.log()
        if e.kind == "rest" and e.path and e.path.endswith("/events") and e.body
    ]
    return [(e["message_type"], e["content"]) for e in posted]


def assert_tool_calls_answered(messages: list[dict[str, Any]]) -> None:
    """Each assistant tool call has exactly one tool message, right after its message."""
    for position, message in enumerate(messages):
        calls = message.get("tool_calls") or []
        block = messages[position + 1 : position + 1 + len(calls)]
        assert sorted(m.get("tool_call_id") for m in block) == sorted(c["id"] for c in calls)


# -- answers ------------------------------------------------------------------------------


async def test_a_graph_answers_from_the_rooms_conversation(platform: Platform) -> None:
    """Without a checkpointer, each run is given the room's messages; the answer is
    posted as one reply."""
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Watched(graph_adapter(peer.base_url, threads=False))
            async with running_agent(platform, adapter):
                first = platform.post_message(room, user, "[quick] hello")
                await platform.wait_until(lambda: status(platform, first) == "processed")
                second = platform.post_message(room, user, "[quick] again")
                await platform.wait_until(lambda: status(platform, second) == "processed")
            asked = chat_requests(peer)
    assert replies(platform, room) == ["quick answer", "quick answer"]
    assert asked == [
        [{"role": "user", "content": "[quick] hello"}],
        [
            {"role": "user", "content": "[quick] hello"},
            {"role": "assistant", "content": "quick answer"},
            {"role": "user", "content": "[quick] again"},
        ],
    ]
    assert adapter.stops[first] == ()  # the asyncio task ended on its own: nothing to stop


async def test_a_checkpointed_graph_keeps_a_thread_per_room_and_is_sent_each_message_once(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = graph_adapter(peer.base_url)
            graph = adapter.graph
            async with running_agent(platform, adapter):
                for text in ["[quick] one", "[quick] two"]:
                    message = platform.post_message(room, user, text)
                    await platform.wait_until(lambda m=message: status(platform, m) == "processed")
            asked = chat_requests(peer)
    assert adapter.run_config(room) == {"configurable": {"thread_id": room}}
    state = graph.get_state({"configurable": {"thread_id": room}})
    assert [(m.type, m.text) for m in state.values["messages"]] == [
        ("human", "[quick] one"),
        ("ai", "quick answer"),
        ("human", "[quick] two"),
        ("ai", "quick answer"),
    ]
    assert asked[1] == [
        {"role": "user", "content": "[quick] one"},
        {"role": "assistant", "content": "quick answer"},
        {"role": "user", "content": "[quick] two"},
    ]


async def test_tool_calls_are_posted_as_events_and_the_final_answer_as_the_reply(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    TOOLS.arm(work=0)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            async with running_agent(platform, graph_adapter(peer.base_url)):
                message = platform.post_message(room, user, "[tool] weather?")
                await platform.wait_until(lambda: status(platform, message) == "processed")
            asked = chat_requests(peer)
    assert TOOLS.events == ["started", "finished"]
    assert tool_events(platform) == [
        ("tool_call", 'lookup({"query": "weather"})'),
        ("tool_result", "sunny (weather)"),
    ]
    assert replies(platform, room) == ["the tool said: sunny"]
    assert_tool_calls_answered(asked[1])


async def test_a_graph_that_fails_fails_the_message(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Watched(graph_adapter(peer.base_url))
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[error] please")
                await platform.wait_until(lambda: status(platform, message) == "failed")
    assert replies(platform, room) == []


def test_the_answer_is_the_last_ai_message_after_the_rooms_message() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from band_trio.adapters import LangGraphError
    from band_trio.adapters._langgraph import _answer

    said = HumanMessage("q")
    calls = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    result = ToolMessage("r", tool_call_id="c1")
    assert _answer({"messages": [said, calls, result, AIMessage("done")]}) == "done"
    with pytest.raises(LangGraphError, match="no text"):
        _answer({"messages": [said, AIMessage("  ")]})
    with pytest.raises(LangGraphError, match="no text"):  # it ended asking for tools
        _answer({"messages": [said, calls]})
    with pytest.raises(LangGraphError, match="without an AI message"):
        _answer({"messages": [AIMessage("an earlier turn's"), said]})
    with pytest.raises(LangGraphError, match="without an AI message"):
        _answer(None)


# -- aborts -------------------------------------------------------------------------------


@early_close
async def test_interrupt_mid_stream_closes_the_models_stream(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=50) as peer:
            adapter = Watched(graph_adapter(peer.base_url))
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[slow] count")
                await peer.wait_for(lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk")
                sent = time.perf_counter()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                cancelled = await peer.wait_for(event="stream_cancelled", timeout=DEADLINE)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                await adapter.wait_for(lambda: message in adapter.stops)
            assert peer.find(event="stream_completed") is None
    assert cancelled["how"] == "cancelled" and cancelled["count"] < 80
    assert replies(platform, room) == []
    [stop] = adapter.stops[message]
    assert (stop.name, stop.outcome) == ("asyncio task", StopOutcome.CONFIRMED)
    print(
        f"\ninterrupt -> adapter Cancelled {1000 * (adapter.cancelled_at[message] - sent):.1f} ms,"
        f" -> server generator cancelled {1000 * (cancelled['perf'] - sent):.1f} ms"
    )


@early_close
async def test_stop_mid_stream_closes_the_stream_and_play_answers_it_once(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=10) as peer:
            adapter = Watched(graph_adapter(peer.base_url))
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await peer.wait_for(lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk")
                platform.send_control(agent_id, "stop", room_id=room, reason="not now")
                cancelled = await peer.wait_for(event="stream_cancelled", timeout=DEADLINE)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert status(platform, message) == "processing"
                assert replies(platform, room) == []
                platform.send_control(agent_id, "play", room_id=room)
                await platform.wait_until(lambda: status(platform, message) == "processed")
            first, replay = chat_requests(peer)
    assert cancelled["req"] == 1 and cancelled["how"] == "cancelled"
    assert replies(platform, room) == [SLOW]
    # the thread holds the stopped message: the replay does not add it again
    assert first == replay == [{"role": "user", "content": "[slow] count"}]


@early_close
@pytest.mark.parametrize("signal", ["interrupt", "stop"])
async def test_an_abort_mid_tool_cancels_the_tool_and_the_thread_is_closed_for_what_follows(
    platform: Platform, signal: str
) -> None:
    """The tools node is cancelled while `lookup` runs: the checkpointer holds the AI
    message whose call never got its result. What the model is sent next (the next
    message after an interrupt, the replay after stop and play) answers it, saying why."""
    agent_id, room, user = seeded(platform)
    TOOLS.arm()
    reason = "wrong question"
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            async with running_agent(platform, graph_adapter(peer.base_url)) as running:
                asked = platform.post_message(room, user, "[tool] weather?")
                await TOOLS.started.wait()
                platform.send_control(agent_id, signal, room_id=room, reason=reason)  # type: ignore[arg-type]
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert TOOLS.events == ["started", "cancelled"]  # the turn waited for it
                if signal == "interrupt":
                    await platform.wait_until(lambda: status(platform, asked) == "processed")
                    later = platform.post_message(room, user, "[quick] something else")
                else:
                    platform.send_control(agent_id, "play", room_id=room)
                    later = asked
                await platform.wait_until(lambda: status(platform, later) == "processed")
            messages = chat_requests(peer)[-1]
    assert_tool_calls_answered(messages)
    [closed] = [m for m in messages if m["role"] == "tool"]
    assert closed == {
        "role": "tool",
        "tool_call_id": "call_lookup_1",
        "content": not_run_note(signal, reason),  # type: ignore[arg-type]
    }
    assert [m["role"] for m in messages][:3] == ["user", "assistant", "tool"]
    assert tool_events(platform)[0] == ("tool_call", 'lookup({"query": "weather"})')
    assert ("tool_result", not_run_note(signal, reason)) not in tool_events(platform)  # type: ignore[arg-type]


# -- configuration ------------------------------------------------------------------------


def test_the_graph_is_named_by_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from band_trio.adapters import langgraph

    monkeypatch.setenv("FRAMEWORKS_MODEL_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BAND_LANGGRAPH_GRAPH", "frameworks:graph")  # a function: called
    adapter = langgraph()
    assert adapter.keeps_threads
    monkeypatch.setenv("BAND_LANGGRAPH_GRAPH", "frameworks:TOOLS")
    with pytest.raises(ConfigurationError, match="not a compiled LangGraph graph"):
        langgraph()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "BAND_LANGGRAPH_GRAPH is not set"),
        ("frameworks", "must be MODULE:ATTR"),
        ("no_such_module_here:graph", "cannot load"),
        ("frameworks:no_such_graph", "cannot load"),
    ],
)
def test_a_missing_or_bad_graph_is_a_one_line_configuration_error(
    monkeypatch: pytest.MonkeyPatch, value: str, says: str
) -> None:
    from band_trio.adapters import langgraph

    monkeypatch.setenv("BAND_LANGGRAPH_GRAPH", value)
    with pytest.raises(ConfigurationError, match=says) as caught:
        langgraph()
    assert "\n" not in str(caught.value)
