"""The OpenAI chat adapter against a real stubllm server, driven by a real agent.

Every test runs the embedded platform and an agent over loopback, and a
stubllm 0.1.5 subprocess (tests/peers) as the model: what the model received
and whether its streaming generator was cancelled are the server's own
records (`peer.events(...)`), not inferences from the client.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import trio

from band_trio import Policy, StopOutcome, Turn
from band_trio.adapters import OpenAIChatAdapter, OpenAIChatError, Tool, openai_chat
from band_trio.adapters._openai import _UNEXPLAINED, _trim
from band_trio.adapters._openai_stream import Draft
from band_trio.contract import LastAbort, RemoteStop, close_tool_calls, not_run_note
from band_trio.errors import ConfigurationError
from band_trio.platform import Platform
from peers import Peer, shared_stubllm_peer
from support import (
    client_sockets,
    early_close,
    replies,
    rooms_with_the_agent,
    running_agent,
    seeded,
    status,
)

DEADLINE = 20
SLOW = " ".join(f"w{i:02d}" for i in range(80))  # the "[slow]" fixture's answer


# httpx2 2.16.2 leaves httpcore2's body generator unclosed when a response is closed before
# its end (see tests/peers/test_peers.py); trio's finalizer warns when it is collected.
class Observed(OpenAIChatAdapter):
    """The adapter, recording per message what its turn saw (for the test only)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
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


def chat_requests(peer: Peer) -> list[dict[str, Any]]:
    """The bodies stubllm received on /v1/chat/completions, in order."""
    return [e["body"] for e in peer.events("request") if e["path"] == "/v1/chat/completions"]


async def request_ending_with(peer: Peer, text: str) -> dict[str, Any]:
    """The first request whose conversation ends with the user message `text`."""

    def last_user(event: dict[str, Any]) -> bool:
        messages = (event.get("body") or {}).get("messages") or []
        users = [m for m in messages if m.get("role") == "user"]
        return bool(users) and users[-1].get("content") == text

    event = await peer.wait_for(last_user, timeout=DEADLINE, event="request")
    body: dict[str, Any] = event["body"]
    return body


def assert_tool_calls_answered(messages: list[dict[str, Any]]) -> None:
    """Each assistant tool call has exactly one tool message, right after its message."""
    for position, message in enumerate(messages):
        calls = message.get("tool_calls") or []
        if message.get("role") != "assistant" or not calls:
            continue
        ids = [c["id"] for c in calls]
        block = messages[position + 1 : position + 1 + len(ids)]
        assert [m["role"] for m in block] == ["tool"] * len(ids), messages
        assert sorted(m["tool_call_id"] for m in block) == sorted(ids), messages
    answered = [m["tool_call_id"] for m in messages if m.get("role") == "tool"]
    asked = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    assert sorted(answered) == sorted(asked), messages


def posted_events(platform: Platform) -> list[dict[str, Any]]:
    """The events the agent posted (`POST .../events` bodies), in order."""
    return [
        json.loads(e.body)["event"]
        for e in platform.log()
        if e.kind == "rest" and e.path and e.path.endswith("/events") and e.body
    ]


def processed(platform: Platform, message: str) -> Callable[[], bool]:
    return lambda: status(platform, message) == "processed"


# -- answers ------------------------------------------------------------------------


async def test_a_streamed_answer_is_posted_and_the_message_processed(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.base_url, "gpt-4o-mini", api_key="sk-test", system="be brief")
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[quick] hello")
                await platform.wait_until(lambda: status(platform, message) == "processed")
                assert client_sockets(peer.port) in (0, None)  # the turn's client is closed
            [body] = chat_requests(peer)
            await peer.wait_for(event="stream_completed", req=1)
    assert replies(platform, room) == ["quick answer"]
    assert body["model"] == "gpt-4o-mini" and body["stream"] is True
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "[quick] hello"},
    ]
    assert "tools" not in body
    assert adapter.stops[message] == ()  # the stream ended on its own: nothing to stop


async def test_history_is_kept_per_room_across_turns(platform: Platform) -> None:
    _, _, user = seeded(platform)
    first_room, other_room = rooms_with_the_agent(platform, 2)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.base_url, "gpt-4o")
            async with running_agent(platform, adapter):
                for room_id, text in [
                    (first_room, "[quick] one"),
                    (first_room, "[quick] two"),
                    (other_room, "[quick] elsewhere"),
                ]:
                    message = platform.post_message(room_id, user, text)
                    await platform.wait_until(processed(platform, message))
                await adapter.on_room_left(other_room)
                assert adapter.history(other_room) == []
            bodies = chat_requests(peer)
    assert [b["messages"] for b in bodies] == [
        [{"role": "user", "content": "[quick] one"}],
        [
            {"role": "user", "content": "[quick] one"},
            {"role": "assistant", "content": "quick answer"},
            {"role": "user", "content": "[quick] two"},
        ],
        [{"role": "user", "content": "[quick] elsewhere"}],
    ]
    assert replies(platform, other_room) == ["quick answer"]


async def test_the_kept_history_is_bounded_and_starts_at_a_user_message(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.base_url, "gpt-4o", max_history=3)
            async with running_agent(platform, adapter):
                for text in ["[quick] a", "[quick] b", "[quick] c"]:
                    message = platform.post_message(room, user, text)
                    await platform.wait_until(processed(platform, message))
            last = chat_requests(peer)[-1]
    assert last["messages"] == [
        {"role": "user", "content": "[quick] b"},
        {"role": "assistant", "content": "quick answer"},
        {"role": "user", "content": "[quick] c"},
    ]


async def test_tool_calls_run_in_order_and_the_model_is_asked_again(platform: Platform) -> None:
    _, room, user = seeded(platform)
    seen: list[dict[str, Any]] = []

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        seen.append(arguments)
        return f"found {arguments['query']}"

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        # raw: stubllm's own framing, every call at index 0 and no "tool_calls" finish
        async with shared_stubllm_peer(raw=True) as peer:
            adapter = Observed(peer.base_url, "gpt-4o", tools=[tool])
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[tools2] both")
                await platform.wait_until(lambda: status(platform, message) == "processed")
            first, second = chat_requests(peer)
    assert seen == [{"query": "a"}, {"query": "b"}]
    assert first["tools"] == [tool.spec()]
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"query": "a"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"query": "b"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "found a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "found b"},
    ]
    assert replies(platform, room) == ["both tools answered"]
    assert [(e["message_type"], e["content"]) for e in posted_events(platform)] == [
        ("tool_call", 'lookup({"query": "a"})'),
        ("tool_result", "found a"),
        ("tool_call", 'lookup({"query": "b"})'),
        ("tool_result", "found b"),
    ]


async def test_an_error_status_fails_the_message_and_leaves_no_history(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.base_url, "gpt-4o")
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[error] please")
                await platform.wait_until(lambda: status(platform, message) == "failed")
                assert adapter.history(room) == []
    assert replies(platform, room) == []


# -- aborts -------------------------------------------------------------------------


@early_close
async def test_interrupt_mid_stream_cancels_the_servers_generator(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=50) as peer:
            adapter = Observed(peer.base_url, "gpt-4o")
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await peer.wait_for(lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk")
                sent = time.perf_counter()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                cancelled = await peer.wait_for(event="stream_cancelled", timeout=DEADLINE)
                await platform.wait_until(lambda: status(platform, message) == "processed")
                await adapter.wait_for(lambda: message in adapter.stops)
                stats = running.agent.remote_stops
                assert client_sockets(peer.port) in (0, None)
            assert peer.find(event="stream_completed") is None
    assert cancelled["how"] == "cancelled" and cancelled["count"] < 80
    assert replies(platform, room) == []  # nothing posted for the interrupted message
    [stop] = adapter.stops[message]
    assert (stop.name, stop.outcome) == ("chat completion", StopOutcome.REQUESTED)
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
            adapter = Observed(peer.base_url, "gpt-4o")
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[slow] count")
                await peer.wait_for(lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk")
                platform.send_control(agent_id, "stop", room_id=room, reason="not now")
                cancelled = await peer.wait_for(event="stream_cancelled", timeout=DEADLINE)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                await trio.testing.wait_all_tasks_blocked()
                assert status(platform, message) == "processing"
                assert replies(platform, room) == []
                platform.send_control(agent_id, "play", room_id=room)
                await platform.wait_until(lambda: status(platform, message) == "processed")
            first, replay = chat_requests(peer)
    assert cancelled["req"] == 1
    assert replies(platform, room) == [SLOW]
    assert adapter.last_aborts[message][1] == LastAbort("stop", "not now", message)
    # the replayed message is asked once, with a note that the first answer was stopped
    assert first["messages"] == [{"role": "user", "content": "[slow] count"}]
    assert replay["messages"][0] == {"role": "user", "content": "[slow] count"}
    [note] = replay["messages"][1:]
    assert note["role"] == "system"
    assert "stopped by the user (reason: not now)" in note["content"]
    assert "answer the message again" in note["content"]


@early_close
async def test_interrupt_during_tool_calls_leaves_a_valid_transcript_and_says_why(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    started = trio.Event()
    ran: list[str] = []

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        ran.append(arguments["query"])
        if arguments["query"] == "a":
            started.set()
            await trio.sleep_forever()  # a slow tool, awaiting something that never comes
        return "found"

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.base_url, "gpt-4o", tools=[tool])
            async with running_agent(platform, adapter):
                asked = platform.post_message(room, user, "[tools2] look both up")
                await started.wait()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="wrong question")
                await platform.wait_until(lambda: status(platform, asked) == "processed")
                later = platform.post_message(room, user, "[quick] something else")
                await platform.wait_until(lambda: status(platform, later) == "processed")
            body = await request_ending_with(peer, "[quick] something else")
    assert ran == ["a"]  # "b" never ran
    messages = body["messages"]
    assert_tool_calls_answered(messages)
    note = not_run_note("interrupt", "wrong question")
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["call_a", "call_b"]
    assert all(m["content"] == note for m in messages if m["role"] == "tool")
    told = [m for m in messages if m["role"] == "system"]
    assert (
        len(told) == 1 and "interrupted by the user (reason: wrong question)" in told[0]["content"]
    )
    assert messages.index(told[0]) == len(messages) - 2  # right before the new message
    assert adapter.last_aborts[later] == [LastAbort("interrupt", "wrong question", asked)]
    # the call of the cut-off tool was shown in the room, no result of it ever was
    assert [e["message_type"] for e in posted_events(platform)] == ["tool_call"]
    assert len(replies(platform, room)) == 1  # only the later message was answered


@early_close
async def test_interrupt_mid_stream_after_a_tool_ran_keeps_the_result_not_the_words(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        return "sunny"

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=10) as peer:
            adapter = Observed(peer.base_url, "gpt-4o", tools=[tool])
            async with running_agent(platform, adapter):
                agent_id = platform.info.agent_id
                assert agent_id
                asked = platform.post_message(room, user, "[tool-slow] weather")
                await peer.wait_for(
                    lambda e: e["count"] >= 3, timeout=DEADLINE, event="chunk", req=2
                )
                platform.send_control(agent_id, "interrupt", room_id=room)
                await peer.wait_for(event="stream_cancelled", req=2, timeout=DEADLINE)
                await platform.wait_until(processed(platform, asked))
                later = platform.post_message(room, user, "[quick] and now?")
                await platform.wait_until(processed(platform, later))
            body = await request_ending_with(peer, "[quick] and now?")
    call = {
        "id": "call_lookup_2",
        "type": "function",
        "function": {"name": "lookup", "arguments": '{"query": "slow"}'},
    }
    note = body["messages"][3]
    assert body["messages"] == [
        {"role": "user", "content": "[tool-slow] weather"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_lookup_2", "content": "sunny"},
        note,  # the words streamed before the interrupt were never posted: not kept
        {"role": "user", "content": "[quick] and now?"},
    ]
    assert note["role"] == "system" and "interrupted by the user before" in note["content"]


@early_close
async def test_stop_during_tool_calls_then_play_replays_with_the_calls_closed(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    started = trio.Event()

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.base_url, "gpt-4o", tools=[tool])
            async with running_agent(platform, adapter) as running:
                held = platform.post_message(room, user, "[tools2] held")
                await started.wait()
                platform.send_control(agent_id, "stop", room_id=room, reason="hold on")
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert status(platform, held) == "processing"
                platform.send_control(agent_id, "play", room_id=room)
                await platform.wait_until(processed(platform, held))
            replay = chat_requests(peer)[-1]
    messages = replay["messages"]
    assert_tool_calls_answered(messages)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "system"]
    assert {m["content"] for m in messages[2:4]} == {not_run_note("stop", "hold on")}
    assert "answer the message again" in messages[-1]["content"]
    assert replies(platform, room) == ["both tools answered"]


@early_close
async def test_a_turn_cut_by_its_deadline_is_closed_with_a_neutral_note(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Observed(peer.base_url, "gpt-4o", tools=[tool])
            policy = Policy(turn_deadline=0.5)
            async with running_agent(platform, adapter, policy=policy):
                slow = platform.post_message(room, user, "[tools2] too slow")
                await platform.wait_until(lambda: status(platform, slow) == "failed")
                later = platform.post_message(room, user, "[quick] next")
                await platform.wait_until(processed(platform, later))
            body = await request_ending_with(peer, "[quick] next")
    messages = body["messages"]
    assert_tool_calls_answered(messages)
    assert {m["content"] for m in messages if m["role"] == "tool"} == {_UNEXPLAINED}
    [note] = [m for m in messages if m["role"] == "system"]
    assert note["content"].startswith("Your previous answer was cut off before it was posted")
    assert adapter.last_aborts[later] == [None]  # a deadline is not a signal


# -- the stream, without a server -------------------------------------------------------


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def test_tool_call_fragments_are_merged_by_index() -> None:
    draft = Draft()
    for chunk in [
        delta(role="assistant", content=None),
        delta(tool_calls=[{"index": 0, "id": "c1", "type": "function",
                           "function": {"name": "f", "arguments": ""}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a"'}}]),
        delta(tool_calls=[{"index": 1, "id": "c2", "function": {"name": "g"}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": ": 1}"}}]),
    ]:  # fmt: skip
        draft.add(chunk)
    draft.add({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert draft.ended
    assert draft.message(cut=False) == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }


def test_a_cut_off_message_keeps_its_calls_and_drops_its_words() -> None:
    draft = Draft()
    draft.add(delta(content="Let me ch"))
    for index, call_id, arguments in [(0, "c1", "{}"), (1, "c2", '{"q": ')]:
        fragment = {
            "index": index,
            "id": call_id,
            "function": {"name": "f", "arguments": arguments},
        }
        draft.add(delta(tool_calls=[fragment]))
    cut = draft.message(cut=True)
    assert cut is not None and cut["content"] is None and len(cut["tool_calls"]) == 2
    closed = close_tool_calls([{"role": "user", "content": "x"}, cut], "interrupt")
    assert [c["id"] for c in closed[1]["tool_calls"]] == ["c1"]  # c2 never finished
    assert closed[2] == {"role": "tool", "tool_call_id": "c1", "content": not_run_note("interrupt")}
    assert Draft().message(cut=True) is None


def test_an_error_chunk_mid_stream_is_an_error() -> None:
    with pytest.raises(OpenAIChatError, match="mid-stream"):
        Draft().add({"error": {"message": "overloaded"}})


@pytest.mark.parametrize(
    ("chunk", "says"),
    [
        ({"choices": {"0": {}}}, "choices that are not a list"),
        ({"choices": ["text"]}, "choices that are not a list"),
        ({"choices": [{"delta": "w00"}]}, "a delta that is not an object"),
        ({"choices": [{"delta": {"content": 5}}]}, "content that is not text"),
        ({"choices": [{"delta": {"tool_calls": {"id": "x"}}}]}, "tool_calls that are not"),
        ({"choices": [{"delta": {"tool_calls": [{"function": "f"}]}}]}, "function that is not"),
    ],
)
def test_a_chunk_of_the_wrong_shape_fails_the_turn_saying_so(
    chunk: dict[str, Any], says: str
) -> None:
    """Never skipped: a garbled stream must not end as a shorter answer."""
    with pytest.raises(OpenAIChatError, match=says):
        Draft().add(chunk)
    Draft().add({"choices": [], "usage": {"total_tokens": 3}})  # a usage chunk is fine


def test_trimming_starts_at_a_user_message_and_keeps_the_latest_exchange() -> None:
    u, a = {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}
    ask = {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}
    result = {"role": "tool", "tool_call_id": "c", "content": "r"}
    assert _trim([u, ask, result, a, u, a], 3) == [u, a]
    assert _trim([u, a, u, ask, result, a], 3) == [u, ask, result, a]  # one exchange, kept whole
    assert _trim([u, a], 3) == [u, a]


# -- configuration --------------------------------------------------------------------


def test_openai_chat_reads_its_settings_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BAND_OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("BAND_OPENAI_API_KEY", "sk-x")
    monkeypatch.setenv("BAND_OPENAI_SYSTEM", "be kind")
    monkeypatch.setenv("BAND_OPENAI_MAX_HISTORY", "10")
    monkeypatch.delenv("BAND_OPENAI_MODEL", raising=False)
    adapter = openai_chat()
    assert adapter.url == "http://127.0.0.1:9/v1/chat/completions"
    assert (adapter.model, adapter.system, adapter.max_history) == ("gpt-4o", "be kind", 10)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("BAND_OPENAI_BASE_URL", "", "BAND_OPENAI_BASE_URL is not set"),
        ("BAND_OPENAI_BASE_URL", "127.0.0.1:9/v1", "BAND_OPENAI_BASE_URL"),
        ("BAND_OPENAI_MAX_HISTORY", "many", "BAND_OPENAI_MAX_HISTORY"),
        ("BAND_OPENAI_MAX_HISTORY", "1", "BAND_OPENAI_MAX_HISTORY"),
    ],
)
def test_a_missing_or_bad_setting_is_a_one_line_configuration_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv("BAND_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=says) as caught:
        openai_chat()
    assert "\n" not in str(caught.value)
