"""The Anthropic adapter meets upstream faults with band-trio's retry rules, not the SDK's.

Each fault is injected at the HTTP layer by the project's own proxy
(bench/_peers/fault_proxy.py) between the SDK and a real stubllm 0.1.5 speaking
Anthropic's stream; what each attempt met and when it came are the proxy's own
records. The SDK's retries are off (`max_retries=0`): every attempt the proxy sees
is one `call_upstream` made. One fault per room, all rooms at once.

Below them, without a server: what each of the SDK's errors means for the retry
rules, the stream draft, the transcript repairs, and the factory's settings.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx2
import pytest
import trio

from band_trio import Policy, UpstreamPolicy
from band_trio.adapters import AnthropicAdapter, AnthropicMessagesError
from band_trio.adapters import anthropic as anthropic_factory
from band_trio.adapters._anthropic_stream import Draft, upstream_fault
from band_trio.adapters._anthropic_transcript import alternating, close_tool_uses, trim
from band_trio.contract import UpstreamFault
from band_trio.errors import ConfigurationError, PeerProtocolError
from band_trio.platform import Platform
from band_trio.retry import FaultKind
from band_trio.testing import transcript_problems
from peers import Peer, fault_proxy, plan, stubllm_peer
from support import (
    early_close,
    errors_posted,
    replies,
    rooms_with_the_agent,
    running_agent,
    seeded,
    status,
)

DEADLINE = 30
QUICK = "quick answer"
SLOW = " ".join(f"w{i:02d}" for i in range(80))
FAST = Policy(upstream=UpstreamPolicy(read_timeout=1.0, retry_base=0.05, retry_cap=0.2))
BAD = '{"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}'

# Each row: the message (its marker picks stubllm's fixture), what the proxy does to the
# attempts at it, what the room ends with, and how many attempts the proxy saw.
ROWS: list[tuple[str, list[dict[str, Any]], str, int]] = [
    ("[quick] 429 twice", [{"status": 429, "retry_after": "0.3"}] * 2, QUICK, 3),
    ("[quick] one 529", [{"status": 529}], QUICK, 2),
    ("[quick] a 400", [{"status": 400, "body": BAD}], "failed", 1),
    ("[slow] ends early", [{"end_after": 5}], SLOW, 2),
    ("[slow] dropped", [{"drop_after": 5}], SLOW, 2),
    ("[slow] corrupted", [{"corrupt": 4}], "failed", 1),
    ("[slow] stalled", [{"stall_after": 5}], SLOW, 2),
    ("[quick] reset", [{"reset": True}], QUICK, 2),
]


# anthropic 2.17's AsyncStream iterates its SSE generators without closing them: an event
# it cannot decode raises out of `__stream__` with `_iter_events` and the generators below
# it suspended, and trio's finalizer warns when they are collected. The response itself
# is closed (by the SDK's `finally`, and by the adapter's stop); the warning is that.
sdk_stream_failed = pytest.mark.filterwarnings(
    "ignore:Async generator 'anthropic\\._streaming\\.:ResourceWarning"
)


def attempts(proxy: Peer, text: str) -> list[dict[str, Any]]:
    return [e for e in proxy.events("request") if e["match"] == text]


@early_close
@sdk_stream_failed
async def test_each_fault_ends_with_the_whole_answer_or_a_clear_error(platform: Platform) -> None:
    _, _, user = seeded(platform)
    rooms = rooms_with_the_agent(platform, len(ROWS))
    with trio.fail_after(DEADLINE):
        async with stubllm_peer(chunk_delay_ms=5) as llm, fault_proxy(llm.url) as proxy:
            for text, steps, _, _ in ROWS:
                await plan(proxy, text, steps)
            adapter = AnthropicAdapter(proxy.url, "claude-sonnet-4-6", api_key="sk-test")
            async with running_agent(platform, adapter, policy=FAST):
                sent = {
                    text: platform.post_message(room, user, text)
                    for room, (text, *_) in zip(rooms, ROWS, strict=True)
                }
                for message in sent.values():
                    await platform.wait_until(
                        lambda m=message: status(platform, m) in ("processed", "failed")
                    )
            seen = {text: attempts(proxy, text) for text, *_ in ROWS}
    for room, (text, _, outcome, tries) in zip(rooms, ROWS, strict=True):
        assert len(seen[text]) == tries, (text, seen[text])
        if outcome == "failed":
            assert status(platform, sent[text]) == "failed", text
            assert replies(platform, room) == [], text
        else:
            assert status(platform, sent[text]) == "processed", text
            assert replies(platform, room) == [outcome], text  # once, and whole
            assert errors_posted(platform, room) == [], text
    times = [e["perf"] for e in seen["[quick] 429 twice"]]  # never before Retry-After
    assert all(later - earlier >= 0.3 for earlier, later in itertools.pairwise(times)), times
    [why] = errors_posted(platform, rooms[2])
    assert "answered 400" in why and "bad" in why
    [why] = errors_posted(platform, rooms[5])
    assert "could not be read" in why


# -- the SDK's errors, as the retry rules see them --------------------------------------


def answer(status: int, body: object, **headers: str) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    return httpx2.Response(status, headers=headers, json=body, request=request)


def status_error(status: int, body: object, **headers: str) -> anthropic.APIStatusError:
    return anthropic.APIStatusError("x", response=answer(status, body, **headers), body=body)


def test_an_error_status_is_a_fault_with_its_wait_and_its_words() -> None:
    body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    fault = upstream_fault(status_error(429, body, **{"retry-after": "7"}), 60)
    assert isinstance(fault, UpstreamFault)
    assert (fault.fault.kind, fault.fault.status, fault.fault.retry_after) == (
        FaultKind.STATUS,
        429,
        7.0,
    )
    assert fault.fault.detail == "slow down"


@pytest.mark.parametrize(
    ("kind", "status"), [("overloaded_error", 529), ("api_error", 500), ("rate_limit_error", 429)]
)
def test_a_transient_error_event_mid_stream_is_retried_as_its_status(
    kind: str, status: int
) -> None:
    body = {"type": "error", "error": {"type": kind, "message": "busy"}}
    fault = upstream_fault(status_error(200, body), 60)  # the stream began with 200
    assert isinstance(fault, UpstreamFault)
    assert (fault.fault.status, fault.fault.transient()) == (status, True)


def test_any_other_error_event_mid_stream_fails_the_turn() -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}
    error = upstream_fault(status_error(200, body), 60)
    assert isinstance(error, AnthropicMessagesError) and not isinstance(error, UpstreamFault)
    assert "mid-stream: no" in str(error)


def connection_error(cause: Exception) -> anthropic.APIConnectionError:
    request = httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")
    try:
        raise anthropic.APIConnectionError(request=request) from cause
    except anthropic.APIConnectionError as error:
        return error


@pytest.mark.parametrize(
    ("cause", "kind"),
    [
        (httpx2.ConnectError("refused"), FaultKind.UNSENT),
        (httpx2.ReadTimeout("silent"), FaultKind.STALLED),
        (httpx2.RemoteProtocolError("cut"), FaultKind.DROPPED),
        (ValueError("not the connection's"), FaultKind.UNSENT),
    ],
)
def test_a_connection_error_is_judged_by_its_cause(cause: Exception, kind: FaultKind) -> None:
    fault = upstream_fault(connection_error(cause), 42)
    assert isinstance(fault, UpstreamFault) and fault.fault.kind is kind
    if kind is FaultKind.STALLED:
        assert fault.fault.detail == "no data for 42 s"
    if isinstance(cause, httpx2.HTTPError):  # as anthropic 2.0 raises a failed body read
        raw = upstream_fault(cause, 42)
        assert isinstance(raw, UpstreamFault) and raw.fault == fault.fault


def test_an_event_that_cannot_be_read_fails_the_turn_saying_so() -> None:
    error = upstream_fault(ValueError("Expecting value: line 1 column 1"), 60)
    assert isinstance(error, AnthropicMessagesError) and "could not be read" in str(error)
    too_long = PeerProtocolError("too long")
    assert upstream_fault(too_long, 60) is too_long


# -- the draft --------------------------------------------------------------------------


def event(**fields: Any) -> Any:
    """A stand-in for one of the stream helper's events (its attributes only)."""
    return SimpleNamespace(**fields)


def block(**fields: Any) -> Any:
    return event(**fields)


def test_a_cut_off_answer_keeps_only_the_tool_uses_the_stream_closed() -> None:
    draft = Draft()
    draft.add(event(type="message_start"))
    draft.add(event(type="content_block_delta", delta=event(type="text_delta", text="Let me")))
    closed = block(type="tool_use", id="t1", name="f", input={"q": 1})
    draft.add(event(type="content_block_stop", index=1, content_block=closed))
    draft.add(
        event(type="content_block_stop", index=0, content_block=block(type="text", text="Hm"))
    )
    assert draft.message(cut=True) == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"q": 1}}],
    }
    assert not draft.ended
    empty = Draft()
    empty.add(event(type="message_start"))
    assert empty.message(cut=True) is None


def test_an_event_before_message_start_and_a_long_answer_fail_the_turn() -> None:
    with pytest.raises(AnthropicMessagesError, match="before message_start"):
        Draft().add(event(type="content_block_delta", index=0, delta=event(type="text_delta")))
    draft = Draft(limit=5)
    draft.add(event(type="message_start"))
    draft.add(event(type="ping"))  # skipped, as an unknown event would be
    with pytest.raises(PeerProtocolError, match="ran past 5 characters"):
        draft.add(event(type="content_block_delta", delta=event(type="text_delta", text="123456")))


# -- the transcript ---------------------------------------------------------------------

USE_A = {"type": "tool_use", "id": "a", "name": "f", "input": {}}
USE_B = {"type": "tool_use", "id": "b", "name": "f", "input": {}}


def result(call: str, text: str = "r") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call, "content": text}


def test_every_tool_use_gets_one_result_right_after_its_message() -> None:
    asked = {"role": "assistant", "content": [{"type": "text", "text": "hm"}, USE_A, USE_B]}
    messages = [
        {"role": "user", "content": "q"},
        asked,
        {"role": "user", "content": [result("a"), result("a", "again"), result("zz")]},
    ]
    closed = close_tool_uses(messages, "not run")
    assert closed == [
        {"role": "user", "content": "q"},
        asked,
        {"role": "user", "content": [result("a"), result("b", "not run")]},
    ]
    assert transcript_problems(closed) == []
    assert transcript_problems(messages) == [
        "tool call 'a': 2 results",
        "tool call 'b': 0 results",
        "message 2: a tool result with no tool call before it",
    ]
    assert close_tool_uses(closed, "not run") == closed  # valid: left as it was
    stray = [{"role": "user", "content": [result("x"), {"type": "text", "text": "hi"}]}]
    assert close_tool_uses(stray, "n") == [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    ]


def test_the_request_alternates_with_the_results_first() -> None:
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [USE_A]},
        {"role": "user", "content": [result("a")]},
        {"role": "user", "content": "note"},
        {"role": "user", "content": "next"},
    ]
    assert alternating(messages) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": [USE_A]},
        {
            "role": "user",
            "content": [
                result("a"),
                {"type": "text", "text": "note"},
                {"type": "text", "text": "next"},
            ],
        },
    ]
    assert messages[2] == {"role": "user", "content": [result("a")]}  # not modified


def test_trimming_starts_at_a_users_own_message() -> None:
    u, a = {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}
    ask = {"role": "assistant", "content": [USE_A]}
    answered = {"role": "user", "content": [result("a")]}
    assert trim([u, ask, answered, a, u, a], 3) == [u, a]
    assert trim([u, a, u, ask, answered, a], 3) == [u, ask, answered, a]  # kept whole


# -- configuration ----------------------------------------------------------------------


def test_anthropic_reads_its_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAND_ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("BAND_ANTHROPIC_API_KEY", "sk-x")
    monkeypatch.setenv("BAND_ANTHROPIC_SYSTEM", "be kind")
    monkeypatch.setenv("BAND_ANTHROPIC_MAX_TOKENS", "512")
    monkeypatch.setenv("BAND_ANTHROPIC_MAX_HISTORY", "10")
    monkeypatch.setenv("BAND_ANTHROPIC_ATTEMPTS", "5")
    monkeypatch.delenv("BAND_ANTHROPIC_MODEL", raising=False)
    adapter = anthropic_factory()
    assert (adapter.base_url, adapter.model, adapter.system) == (
        "http://127.0.0.1:9",
        "claude-sonnet-4-6",
        "be kind",
    )
    assert (adapter.max_tokens, adapter.max_history) == (512, 10)
    assert adapter.upstream == UpstreamPolicy(attempts=5)
    monkeypatch.delenv("BAND_ANTHROPIC_BASE_URL")
    assert anthropic_factory().base_url == "https://api.anthropic.com"


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("BAND_ANTHROPIC_BASE_URL", "127.0.0.1:9", "BAND_ANTHROPIC_BASE_URL"),
        ("BAND_ANTHROPIC_API_KEY", "", "BAND_ANTHROPIC_API_KEY or ANTHROPIC_API_KEY"),
        ("BAND_ANTHROPIC_MAX_TOKENS", "0", "BAND_ANTHROPIC_MAX_TOKENS"),
        ("BAND_ANTHROPIC_MAX_HISTORY", "1", "BAND_ANTHROPIC_MAX_HISTORY"),
        ("BAND_ANTHROPIC_READ_TIMEOUT", "soon", "BAND_ANTHROPIC_READ_TIMEOUT"),
    ],
)
def test_a_missing_or_bad_setting_is_a_one_line_configuration_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv("BAND_ANTHROPIC_API_KEY", "sk-x")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=says) as caught:
        anthropic_factory()
    assert "\n" not in str(caught.value)
