"""stubllm's `/v1/messages` stream is Anthropic's, as the official SDK's stream helper reads it.

stubllm 0.1.5 streams that route without `message_start`, drops the last text token and
puts every block at index 0; the project's peer speaks the documented event sequence
instead (bench/_peers/stubllm_anthropic.py). Each test reads it with the SDK itself,
under trio, against the real peer process; the unit test at the end holds the events'
order and indexes without a server.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import trio
from stubllm.fixtures.models import MockResponse, ToolCallResponse

from band_trio.bench._peers.stubllm_anthropic import anthropic_stream, normalize_messages
from peers import shared_stubllm_peer

DEADLINE = 20
SLOW = " ".join(f"w{i:02d}" for i in range(80))


def client(url: str) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key="sk-test", base_url=url, max_retries=0)


async def test_the_sdks_stream_helper_accumulates_every_block_and_every_token() -> None:
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=0) as peer:
            sdk = client(peer.url)
            try:
                async with sdk.messages.stream(
                    model="claude-sonnet-4-6",
                    max_tokens=100,
                    messages=[{"role": "user", "content": "[blocks] both"}],
                ) as stream:
                    message = await stream.get_final_message()
                async with sdk.messages.stream(
                    model="claude-sonnet-4-6",
                    max_tokens=100,
                    messages=[{"role": "user", "content": "[slow] count"}],
                ) as stream:
                    text = await stream.get_final_text()
            finally:
                await sdk.close()
            kinds = [e["kind"] for e in peer.events("chunk") if e["req"] == 1]
    assert [block.type for block in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[0].text == "Let me look both up."  # type: ignore[union-attr]
    uses = [(b.id, b.name, b.input) for b in message.content if b.type == "tool_use"]
    assert uses == [("toolu_a", "lookup", {"query": "a"}), ("toolu_b", "lookup", {"query": "b"})]
    assert (message.role, message.stop_reason, message.usage.output_tokens) == (
        "assistant",
        "tool_use",
        20,
    )
    assert text == SLOW  # the last token too
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 3


async def test_a_tool_result_is_matched_as_a_tool_message() -> None:
    """The fixtures' "after the tool result" criterion (`role: tool`) holds for a user
    message of `tool_result` blocks, so one fixture file serves both APIs."""
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            sdk = client(peer.url)
            try:
                async with sdk.messages.stream(
                    model="claude-sonnet-4-6",
                    max_tokens=100,
                    messages=[
                        {"role": "user", "content": "[tool] weather?"},
                        {
                            "role": "assistant",
                            "content": [
                                {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}
                            ],
                        },
                        {
                            "role": "user",
                            "content": [
                                {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}
                            ],
                        },
                    ],
                ) as stream:
                    text = await stream.get_final_text()
            finally:
                await sdk.close()
            [match] = peer.events("match")
    assert match["fixture"] == "tool-result"
    assert text == "the tool said: sunny"


def events(frames: list[str]) -> list[dict[str, Any]]:
    parsed = []
    for frame in frames:
        name, data = frame.strip().split("\n")
        assert name.startswith("event: ") and data.startswith("data: ")
        event = json.loads(data[len("data: ") :])
        assert name[len("event: ") :] == event["type"]  # the SSE name is the data's type
        parsed.append(event)
    return parsed


async def test_each_block_has_its_own_index_and_its_whole_input() -> None:
    response = MockResponse(
        content="Hi there",
        tool_calls=[
            ToolCallResponse(id="t1", function={"name": "f", "arguments": '{"a": [1, 2]}'}),
            ToolCallResponse(id="t2", function={"name": "g", "arguments": {"b": True}}),
        ],
        stream_chunk_delay_ms=0,
    )
    sent = events([frame async for frame in anthropic_stream(response, "m", "msg_1")])
    start = sent[0]["message"]
    assert (start["id"], start["type"], start["role"], start["content"]) == (
        "msg_1",
        "message",
        "assistant",
        [],
    )
    assert start["stop_reason"] is None and "input_tokens" in start["usage"]
    blocks: dict[int, list[str]] = {}
    for event in sent:
        if event["type"] == "content_block_delta":
            delta = event["delta"]
            blocks.setdefault(event["index"], []).append(
                delta.get("text", delta.get("partial_json"))
            )
    assert {i: "".join(pieces) for i, pieces in blocks.items()} == {
        0: "Hi there",
        1: '{"a": [1, 2]}',
        2: '{"b": true}',
    }
    starts = [e for e in sent if e["type"] == "content_block_start"]
    assert [(e["index"], e["content_block"]["type"]) for e in starts] == [
        (0, "text"),
        (1, "tool_use"),
        (2, "tool_use"),
    ]
    assert [e["index"] for e in sent if e["type"] == "content_block_stop"] == [0, 1, 2]
    assert sent[-2]["delta"]["stop_reason"] == "tool_use"
    assert sent[-1] == {"type": "message_stop"}


def test_requests_are_matched_as_openai_shaped_messages() -> None:
    assert normalize_messages(
        [
            {"role": "user", "content": [{"type": "text", "text": "[x] hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f"}]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "r"},
                    {"type": "text", "text": "and?"},
                ],
            },
        ],
        [{"type": "text", "text": "be brief"}],
    ) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "[x] hi"},
        {"role": "assistant", "content": ""},
        {"role": "tool", "content": "r"},
        {"role": "user", "content": "and?"},
    ]
