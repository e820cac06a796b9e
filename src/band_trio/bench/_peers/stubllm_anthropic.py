"""stubllm 0.1.5's `/v1/messages` stream, made to speak Anthropic's Messages streaming events.

Imported by `stubllm_server.py` (a script): `anthropic_stream` replaces the stream of
stubllm's `AnthropicProvider`, and `normalize_messages` its matching view of a request.

Why. stubllm streams every provider through one OpenAI-shaped loop
(`stubllm.streaming.sse.stream_response`), and for Anthropic that loop is not what the
official SDK's stream helper (`client.messages.stream(...)`) accepts: it sends no
`message_start` (the helper accumulates nothing before one, so `get_final_message()`
fails), it replaces the last text token by the `message_delta` (that token is lost), it
puts every block at index 0, and a tool-use block gets neither its input (no
`input_json_delta`) nor a `content_block_stop`.

What is sent instead, as Anthropic documents the stream ("Streaming Messages"): one
`message_start` holding a `Message` with empty `content`; then per content block a
`content_block_start` (its `index` is its place in the final `content`), one or more
`content_block_delta` (`text_delta`, or `input_json_delta` with the tool input's JSON in
pieces) and a `content_block_stop`; a `ping` after the first block starts; then one
`message_delta` (`stop_reason`, `stop_sequence`, cumulative `usage.output_tokens`) and
`message_stop`. A fixture's text is one text block, split into tokens as stubllm splits
it (every token sent); each of its tool calls is one `tool_use` block after it, its id
and name the fixture's. `latency_ms` delays the whole stream, `stream_chunk_delay_ms`
separates two deltas, as in stubllm.

The tool results of a request are what stubllm's fixtures match as `role: tool`
messages (the OpenAI shape): `normalize_messages` turns each `tool_result` block of a
user message into one, so one fixture file serves both routes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from stubllm.fixtures.models import MockResponse
from stubllm.streaming.sse import _tokenize

__all__ = ["anthropic_stream", "normalize_messages"]

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def frame(data: dict[str, Any]) -> str:
    """One server-sent event: its name is its data's `type`, as Anthropic sends them."""
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"


async def anthropic_stream(
    response: MockResponse, model: str, request_id: str
) -> AsyncIterator[str]:
    """The fixture `response` as Anthropic's Messages stream (see the module)."""
    delay = response.stream_chunk_delay_ms / 1000.0
    if response.latency_ms > 0:
        await asyncio.sleep(response.latency_ms / 1000.0)
    usage = response.usage
    yield frame(
        {
            "type": "message_start",
            "message": {
                "id": request_id,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": model,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": usage.get("prompt_tokens", 10), "output_tokens": 1},
            },
        }
    )
    blocks: list[tuple[dict[str, Any], str, list[str]]] = []
    calls = response.tool_calls or []
    if response.content is not None or not calls:
        blocks.append(
            ({"type": "text", "text": ""}, "text_delta", _tokenize(response.content or ""))
        )
    for call in calls:
        arguments = call.function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        start = {
            "type": "tool_use",
            "id": call.id,
            "name": call.function.get("name", ""),
            "input": {},
        }
        blocks.append((start, "input_json_delta", ["", *_tokenize(arguments)]))
    deltas_left = sum(len(pieces) for _, _, pieces in blocks)
    for index, (start, kind, pieces) in enumerate(blocks):
        yield frame({"type": "content_block_start", "index": index, "content_block": start})
        if index == 0:
            yield frame({"type": "ping"})
        for piece in pieces:
            field = "text" if kind == "text_delta" else "partial_json"
            delta = {"type": kind, field: piece}
            yield frame({"type": "content_block_delta", "index": index, "delta": delta})
            deltas_left -= 1
            if delay > 0 and deltas_left:
                await asyncio.sleep(delay)
        yield frame({"type": "content_block_stop", "index": index})
    reason = "tool_use" if calls else _STOP_REASONS.get(response.finish_reason, "end_turn")
    yield frame(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": usage.get("completion_tokens", 20)},
        }
    )
    yield frame({"type": "message_stop"})


def normalize_messages(messages: list[dict[str, Any]], system: Any) -> list[dict[str, Any]]:
    """A Messages API request as the fixtures match it: `{role, content}` with text content.

    A system prompt (text or text blocks) is a `system` message; a user message's
    `tool_result` blocks are each a `tool` message (their text as content), its text
    blocks one `user` message; an assistant's text blocks are joined."""
    normalized: list[dict[str, Any]] = []
    if system:
        normalized.append({"role": "system", "content": _text(system)})
    for message in messages:
        role = message.get("role", "user")
        content = message.get("content", "")
        if not isinstance(content, list):
            normalized.append({"role": role, "content": str(content)})
            continue
        blocks = [block for block in content if isinstance(block, dict)]
        for block in blocks:
            if block.get("type") == "tool_result":
                normalized.append({"role": "tool", "content": _text(block.get("content", ""))})
        texts = [block for block in blocks if block.get("type") == "text"]
        if texts or not blocks or role != "user":
            normalized.append({"role": role, "content": _text(texts)})
    return normalized


def _text(content: Any) -> str:
    """The text of a string or of a list of blocks (their `text`, space-joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)
