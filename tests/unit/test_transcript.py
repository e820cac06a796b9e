"""`close_tool_calls` and `not_run_note`: a valid transcript after an abort mid tool-calls."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from band_trio.contract import close_tool_calls, not_run_note

Msg = dict[str, Any]


def call(call_id: str, name: str = "lookup", arguments: str = "{}") -> Msg:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asks(*calls: Msg, content: str | None = None) -> Msg:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def result(call_id: str, content: str = "ok") -> Msg:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def user(text: str) -> Msg:
    return {"role": "user", "content": text}


def assert_valid(messages: list[Msg]) -> None:
    """What the chat completions API requires of tool calls: each assistant message
    with `tool_calls` is followed at once by one `tool` message per call, and no
    `tool` message stands anywhere else."""
    position = 0
    while position < len(messages):
        message = messages[position]
        assert message.get("role") != "tool", f"a tool message answers nothing: {message}"
        position += 1
        if message.get("role") == "assistant":
            assert message.get("content") is not None or message.get("tool_calls")
        if message.get("role") != "assistant" or "tool_calls" not in message:
            continue
        ids = [c["id"] for c in message["tool_calls"]]
        assert ids and len(set(ids)) == len(ids)
        block = messages[position : position + len(ids)]
        assert [m.get("role") for m in block] == ["tool"] * len(ids), messages
        assert sorted(m["tool_call_id"] for m in block) == sorted(ids)
        position += len(ids)


# -- not_run_note ---------------------------------------------------------------


def test_not_run_note_says_what_happened_and_why() -> None:
    assert not_run_note("interrupt") == "not run: the turn was interrupted by the user"
    assert not_run_note("stop") == "not run: the turn was stopped by the user"
    assert not_run_note("stop", "wrong room") == (
        "not run: the turn was stopped by the user (reason: wrong room)"
    )


def test_not_run_note_keeps_a_reason_on_one_line_and_ignores_a_blank_one() -> None:
    assert not_run_note("interrupt", "  too\n slow  ") == (
        "not run: the turn was interrupted by the user (reason: too slow)"
    )
    assert not_run_note("interrupt", " \n") == not_run_note("interrupt")


def test_not_run_note_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind"):
        not_run_note("shutdown")  # type: ignore[arg-type]


# -- close_tool_calls: examples ------------------------------------------------------


def test_the_calls_after_the_last_result_get_a_note_in_their_order() -> None:
    messages = [
        user("compute"),
        asks(call("a"), call("b"), call("c")),
        result("a", "1"),
    ]
    closed = close_tool_calls(messages, "interrupt", "enough")
    note = "not run: the turn was interrupted by the user (reason: enough)"
    assert closed == [
        user("compute"),
        asks(call("a"), call("b"), call("c")),
        result("a", "1"),
        result("b", note),
        result("c", note),
    ]
    assert_valid(closed)


def test_a_call_with_no_result_at_all_is_answered_right_after_its_message() -> None:
    messages = [user("x"), asks(call("a")), user("next")]
    assert close_tool_calls(messages, "stop") == [
        user("x"),
        asks(call("a")),
        result("a", "not run: the turn was stopped by the user"),
        user("next"),
    ]


def test_a_valid_list_comes_back_equal_and_the_input_is_not_modified() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        user("x"),
        asks(call("a"), call("b"), content="let me look"),
        result("b", "2"),  # results need not be in call order
        result("a", "1"),
        {"role": "assistant", "content": "done"},
    ]
    before = copy.deepcopy(messages)
    closed = close_tool_calls(messages, "interrupt")
    assert closed == messages
    assert messages == before
    assert all(a is not b for a, b in zip(closed, messages, strict=True))


def test_results_separated_from_their_call_are_moved_up() -> None:
    messages = [
        asks(call("a"), call("b")),
        result("a"),
        {"role": "system", "content": "note"},
        result("b"),
    ]
    closed = close_tool_calls(messages, "interrupt")
    assert closed == [
        asks(call("a"), call("b")),
        result("a"),
        result("b"),
        {"role": "system", "content": "note"},
    ]


def test_orphan_early_and_duplicate_results_are_dropped() -> None:
    messages = [
        result("a", "before its call"),
        asks(call("a")),
        result("a", "first"),
        result("a", "second"),
        result("zzz", "answers nothing"),
    ]
    assert close_tool_calls(messages, "interrupt") == [asks(call("a")), result("a", "first")]


def test_a_call_cut_off_mid_stream_is_removed_not_answered() -> None:
    cut = asks(call("a", arguments='{"q": 1}'), call("b", arguments='{"q": '))
    closed = close_tool_calls([user("x"), cut], "interrupt")
    assert closed == [
        user("x"),
        asks(call("a", arguments='{"q": 1}')),
        result("a", not_run_note("interrupt")),
    ]


@pytest.mark.parametrize(
    "broken",
    [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}},  # no id yet
        {"id": "", "function": {"name": "f", "arguments": "{}"}},
        {"id": "x", "function": {"arguments": "{}"}},  # no name yet
        {"id": "x", "function": {"name": "f", "arguments": "[1]"}},  # not an object
        {"id": "x", "function": {"name": "f"}},
        {"id": "x"},
        "not a call",
    ],
)
def test_an_assistant_message_left_with_nothing_is_dropped(broken: Any) -> None:
    messages = [user("x"), {"role": "assistant", "content": None, "tool_calls": [broken]}]
    assert close_tool_calls(messages, "stop") == [user("x")]


def test_an_assistant_message_left_with_content_keeps_it_without_tool_calls() -> None:
    messages = [asks(call("a", arguments="{"), content="Let me chec")]
    assert close_tool_calls(messages, "stop") == [{"role": "assistant", "content": "Let me chec"}]


def test_a_malformed_call_that_was_answered_is_kept() -> None:
    messages = [asks(call("a", arguments="not json")), result("a", "error: bad arguments")]
    assert close_tool_calls(messages, "interrupt") == messages


def test_a_call_id_used_twice_is_kept_once() -> None:
    messages = [asks(call("a")), result("a"), asks(call("a"), call("b"))]
    closed = close_tool_calls(messages, "interrupt")
    assert closed == [
        asks(call("a")),
        result("a"),
        asks(call("b")),
        result("b", not_run_note("interrupt")),
    ]
    assert_valid(closed)


def test_a_given_note_replaces_the_signal_text() -> None:
    closed = close_tool_calls([asks(call("a"))], "interrupt", "ignored", note="not run: deadline")
    assert closed[-1] == result("a", "not run: deadline")


# -- close_tool_calls: properties ------------------------------------------------------

IDS = ["c0", "c1", "c2", "c3", "c4"]
arguments = st.sampled_from(['{"n": 1}', "{}", '{"n": ', "", "[]"])
tool_call = st.one_of(
    st.builds(call, st.sampled_from(IDS), arguments=arguments),
    st.fixed_dictionaries({"function": st.just({"name": "f", "arguments": "{}"})}),
)
message = st.one_of(
    st.builds(user, st.text(max_size=3)),
    st.just({"role": "system", "content": "sys"}),
    st.just({"role": "assistant", "content": "text"}),
    st.builds(
        lambda calls, content: asks(*calls, content=content),
        st.lists(tool_call, max_size=4),
        st.sampled_from([None, "partial"]),
    ),
    st.builds(result, st.sampled_from([*IDS, "orphan"]), st.text(max_size=3)),
)
transcripts = st.lists(message, max_size=14)
kinds = st.sampled_from(["interrupt", "stop"])


@given(transcripts, kinds, st.one_of(st.none(), st.text(max_size=10)))
def test_any_list_comes_out_valid(messages: list[Msg], kind: Any, reason: str | None) -> None:
    assert_valid(close_tool_calls(messages, kind, reason))


@given(transcripts, kinds)
def test_closing_twice_changes_nothing(messages: list[Msg], kind: Any) -> None:
    once = close_tool_calls(messages, kind)
    assert close_tool_calls(once, kind) == once
    assert close_tool_calls(once, "stop" if kind == "interrupt" else "interrupt") == once


@given(transcripts, kinds)
def test_other_messages_keep_their_order_and_results_their_content(
    messages: list[Msg], kind: Any
) -> None:
    before = copy.deepcopy(messages)
    closed = close_tool_calls(messages, kind)
    assert messages == before

    def plain(seq: list[Msg]) -> list[Msg]:
        return [m for m in seq if m["role"] in ("user", "system")]

    assert plain(closed) == plain(messages)
    note = not_run_note(kind)
    declared: set[str] = set()
    first: dict[str, str] = {}
    for m in messages:
        if m["role"] == "assistant":
            declared.update(c["id"] for c in m.get("tool_calls", []) if c.get("id"))
        elif m["role"] == "tool" and m["tool_call_id"] in declared:
            first.setdefault(m["tool_call_id"], m["content"])
    for m in closed:
        if m["role"] == "tool":
            assert m["content"] == first.get(m["tool_call_id"], note)


@given(transcripts, kinds)
def test_every_complete_call_survives(messages: list[Msg], kind: Any) -> None:
    def complete(c: Msg) -> bool:
        try:
            return "id" in c and isinstance(json.loads(c["function"]["arguments"]), dict)
        except ValueError:
            return False

    wanted = {c["id"] for m in messages for c in m.get("tool_calls", []) if complete(c)}
    kept = {c["id"] for m in close_tool_calls(messages, kind) for c in m.get("tool_calls", [])}
    assert wanted <= kept


def test_a_cut_off_call_gives_its_id_to_a_later_complete_one() -> None:
    messages = [asks(call("a", arguments='{"n": '), call("a", arguments='{"n": 1}'))]
    assert close_tool_calls(messages, "stop") == [
        asks(call("a", arguments='{"n": 1}')),
        result("a", not_run_note("stop")),
    ]
