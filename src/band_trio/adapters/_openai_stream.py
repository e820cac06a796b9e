"""The OpenAI chat completions stream: server-sent chunks into one assistant message.

What a chunk may carry (content deltas, tool-call fragments merged by index, a
finish reason, an error) and what a server may do instead of streaming (one
JSON answer), kept apart from the adapter's conversation logic.
"""

from __future__ import annotations

import json
import uuid
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx2
import trio

from ..contract import MAX_ANSWER_CHARS, server_sent_events
from ..errors import PeerProtocolError, UpstreamError
from ..policy import UpstreamPolicy

__all__ = ["Draft", "Msg", "OpenAIChatError", "decode", "read_stream"]

Msg = dict[str, Any]


class OpenAIChatError(UpstreamError):
    """The chat completions server failed the request or answered something unusable."""


@dataclass(slots=True)
class _Call:
    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def message(self, *, finished: bool) -> Msg:
        """As a `tool_calls` entry. A finished call with no id gets one (so its result
        can name it) and no arguments means `{}`; a cut-off one is left as it came."""
        arguments = "".join(self.arguments)
        call_id = self.id
        if finished:
            call_id = call_id or f"call_{uuid.uuid4().hex[:24]}"
            arguments = arguments or "{}"
        return {
            "id": call_id,
            "type": self.type,
            "function": {"name": self.name, "arguments": arguments},
        }


class Draft:
    """An assistant message assembled from streamed deltas.

    Tool call fragments are merged by their `index`, as OpenAI streams them (the
    `id` and `name` in the first fragment, the arguments in pieces); a fragment
    with a new `id` at an index already in use starts a new call (stubllm 0.1.5
    streams every call at index 0)."""

    def __init__(self, limit: int = MAX_ANSWER_CHARS) -> None:
        self.limit = limit
        """Characters the answer may hold (`UpstreamPolicy.max_answer_chars`)."""
        self.content: list[str] = []
        self.calls: list[_Call] = []
        self.at: dict[int, _Call] = {}
        self.finish: str | None = None
        self.done = False
        self.size = 0

    @property
    def ended(self) -> bool:
        return self.done or self.finish is not None

    def add(self, chunk: Msg) -> None:
        """One chunk. A chunk not shaped as OpenAI's (choices not a list of objects, a
        delta or tool call not an object, content not text) fails the turn, saying what
        it was: never skipped, so a garbled stream is not posted as an answer."""
        if "error" in chunk:
            raise OpenAIChatError(f"the server sent an error mid-stream: {chunk['error']}")
        for choice in _list(chunk.get("choices"), "choices", chunk):
            if choice.get("index", 0) != 0:
                continue
            delta = _obj(choice.get("delta") or {}, "a delta", chunk)
            content = delta.get("content")
            if content is not None and not isinstance(content, str):
                raise OpenAIChatError(f"the server sent content that is not text: {chunk!r:.200}")
            if content:
                self.content.append(content)
                self._grew(len(content))
            for fragment in _list(delta.get("tool_calls"), "tool_calls", chunk):
                self._fragment(fragment)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])

    def _grew(self, by: int) -> None:
        self.size += by
        if self.size > self.limit:
            raise PeerProtocolError(f"the model's answer ran past {self.limit} characters")

    def _fragment(self, fragment: Msg) -> None:
        index = fragment.get("index", len(self.calls))
        fid = fragment.get("id") or ""
        call = self.at.get(index)
        if call is None or (fid and call.id and fid != call.id):
            call = self.at[index] = _Call()
            self.calls.append(call)
        call.id = call.id or fid
        call.type = fragment.get("type") or call.type
        function = _obj(fragment.get("function") or {}, "a tool call's function", fragment)
        call.name = call.name or function.get("name") or ""
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call.arguments.append(arguments)
            self._grew(len(arguments))
        elif arguments is not None:  # a server that sends the arguments as an object
            call.arguments.append(json.dumps(arguments))

    def whole(self, body: Msg) -> None:
        """A non-streamed answer (`choices[0].message`)."""
        choices = body.get("choices") or [{}]
        message = choices[0].get("message") or {}
        content = message.get("content")
        self.content = [content] if isinstance(content, str) else []
        for index, raw in enumerate(message.get("tool_calls") or []):
            self._fragment({**raw, "index": index})
        self.finish = str(choices[0].get("finish_reason") or "stop")

    def message(self, *, cut: bool) -> Msg | None:
        """The assistant message; cut off, only its tool calls (None if it had none)."""
        if cut:  # an id or arguments still missing: `close_tool_calls` drops that call
            calls = [call.message(finished=False) for call in self.calls]
            return {"role": "assistant", "content": None, "tool_calls": calls} if calls else None
        answer: Msg = {"role": "assistant", "content": "".join(self.content) or None}
        if self.calls:
            answer["tool_calls"] = [call.message(finished=True) for call in self.calls]
        return answer


async def read_stream(response: httpx2.Response, draft: Draft, upstream: UpstreamPolicy) -> None:
    """Feed the stream's events to `draft` until `[DONE]` (or the end of the body); the
    rest of the body gets `drain_grace` to end."""
    events = server_sent_events(response, max_event=upstream.max_event)
    with trio.CancelScope() as drain:
        async with aclosing(events):
            async for event in events:
                if draft.done:
                    continue  # after [DONE]: let the body end, so the server sees no abort
                if event.data.strip() == "[DONE]":
                    draft.done = True
                    drain.deadline = trio.current_time() + upstream.drain_grace
                    continue
                draft.add(decode(event.data.encode()))


def _list(value: object, what: str, chunk: Msg) -> list[Msg]:
    """`value` as a list of objects (None: empty), or the turn fails naming the chunk."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise OpenAIChatError(
            f"the server sent {what} that are not a list of objects: {chunk!r:.200}"
        )
    return value


def _obj(value: object, what: str, chunk: Msg) -> Msg:
    if not isinstance(value, dict):
        raise OpenAIChatError(f"the server sent {what} that is not an object: {chunk!r:.200}")
    return value


def decode(raw: bytes) -> Msg:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise OpenAIChatError(f"the server sent something that is not JSON: {raw[:200]!r}") from exc
    if not isinstance(value, dict):
        raise OpenAIChatError(f"the server sent JSON that is not an object: {raw[:200]!r}")
    return value
