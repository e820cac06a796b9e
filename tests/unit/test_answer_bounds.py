"""A peer that streams on without end fails the turn instead of growing memory: each
reference adapter holds at most `MAX_ANSWER_CHARS` of one answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from band_trio.adapters._a2a_wire import Answer as A2AAnswer
from band_trio.adapters._a2a_wire import ArtifactUpdate
from band_trio.adapters._openai_stream import Draft
from band_trio.adapters._opencode_events import Answer as OpenCodeAnswer
from band_trio.contract import MAX_ANSWER_CHARS
from band_trio.errors import PeerProtocolError

CHUNK = "x" * 10_000
ENOUGH = MAX_ANSWER_CHARS // len(CHUNK) + 1


def feed(add: Callable[[Any], None], event: Any, times: int = ENOUGH) -> None:
    for _ in range(times):
        add(event)


def test_an_endless_chat_completion_is_cut_at_the_bound() -> None:
    draft = Draft()
    with pytest.raises(PeerProtocolError, match="ran past"):
        feed(draft.add, {"choices": [{"index": 0, "delta": {"content": CHUNK}}]})
    assert sum(map(len, draft.content)) <= MAX_ANSWER_CHARS + len(CHUNK)


def test_endless_tool_call_arguments_are_cut_too() -> None:
    draft = Draft()
    fragment = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": CHUNK}}
    with pytest.raises(PeerProtocolError):
        feed(draft.add, {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})


def test_an_endless_a2a_artifact_is_cut_but_a_replaced_one_is_not_counted_twice() -> None:
    answer = A2AAnswer()
    replace = ArtifactUpdate("t", None, "a", CHUNK, append=False, last_chunk=False)
    feed(answer.add, replace, ENOUGH * 2)  # replacing chunks: never more than one held
    append = ArtifactUpdate("t", None, "a", CHUNK, append=True, last_chunk=False)
    with pytest.raises(PeerProtocolError, match="ran past"):
        feed(answer.add, append)


def test_an_endless_opencode_answer_is_cut_and_whole_part_updates_replace() -> None:
    answer = OpenCodeAnswer(max_retries=2)
    answer.add({"type": "message.updated", "properties": {"info": {
        "role": "assistant", "id": "m1", "parentID": "u1"}}})  # fmt: skip
    update = {"type": "message.part.updated", "properties": {"part": {
        "type": "text", "messageID": "m1", "id": "p1", "text": CHUNK}}}  # fmt: skip
    feed(answer.add, update, ENOUGH * 2)
    delta = {"type": "message.part.delta",
             "properties": {"partID": "p1", "field": "text", "delta": CHUNK}}  # fmt: skip
    with pytest.raises(PeerProtocolError, match="ran past"):
        feed(answer.add, delta)


def test_endless_empty_opencode_messages_and_parts_are_cut_too() -> None:
    """A peer naming a new assistant message (or a new empty text part) in every event
    holds no characters, but each is an entry the answer keeps: they count as one each."""
    messages = (
        {
            "type": "message.updated",
            "properties": {"info": {"role": "assistant", "id": f"m{n}", "parentID": "u1"}},
        }
        for n in range(2_000)
    )
    answer = OpenCodeAnswer(max_retries=2, limit=1_000)
    with pytest.raises(PeerProtocolError, match="ran past"):
        list(map(answer.add, messages))
    parts = (
        {
            "type": "message.part.updated",
            "properties": {"part": {"type": "text", "messageID": "m1", "id": f"p{n}", "text": ""}},
        }
        for n in range(2_000)
    )
    answer = OpenCodeAnswer(max_retries=2, limit=1_000)
    answer.add({"type": "message.updated", "properties": {"info": {
        "role": "assistant", "id": "m1", "parentID": "u1"}}})  # fmt: skip
    with pytest.raises(PeerProtocolError, match="ran past"):
        list(map(answer.add, parts))
