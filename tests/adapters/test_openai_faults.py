"""The OpenAI chat adapter against a real stubllm behind the fault-injecting proxy.

Each fault of the table in docs/reference/adapters.md ("Upstream faults") is
injected at the HTTP layer by the project's own proxy (bench/_peers/fault_proxy.py)
between the adapter and a real stubllm 0.1.5; what each attempt met and when it
came are the proxy's own records. One fault per room, all rooms at once.
"""

from __future__ import annotations

import itertools
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from band_trio import Policy, Turn, UpstreamPolicy
from band_trio.adapters import OpenAIChatAdapter
from band_trio.platform import Platform
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
FAST = Policy(
    upstream=UpstreamPolicy(read_timeout=1.0, retry_base=0.05, retry_cap=0.2),
)


def attempts(proxy: Peer, text: str) -> list[dict[str, Any]]:
    """The proxy's records of the requests for the message `text`, in order."""
    return [e for e in proxy.events("request") if e["match"] == text]


# Each row: the message (its marker picks stubllm's fixture), what the proxy does to
# the attempts at it, what the room ends with, and how many attempts the proxy saw.
ROWS: list[tuple[str, list[dict[str, Any]], str, int]] = [
    ("[quick] 429 twice", [{"status": 429, "retry_after": "1"}] * 2, QUICK, 3),
    ("[quick] one 503", [{"status": 503}], QUICK, 2),
    ("[quick] a 400", [{"status": 400, "body": '{"error": {"message": "bad"}}'}], "failed", 1),
    ("[slow] ends early", [{"end_after": 3}], SLOW, 2),
    ("[slow] dropped", [{"drop_after": 3}], SLOW, 2),
    ("[slow] corrupted", [{"corrupt": 2}], "failed", 1),
    ("[slow] stalled", [{"stall_after": 3}], SLOW, 2),
    ("[quick] no answer", [{"stall": True}], QUICK, 2),
    ("[quick] reset", [{"reset": True}], QUICK, 2),
    ("[quick] a 529 then a 502", [{"status": 529}, {"status": 502}], QUICK, 3),
    ("[quick] an endless 500", [{"status": 500, "endless": True}], QUICK, 2),
    ("[quick] an endless 200", [{"status": 200, "endless": True}], "failed", 1),
]


@early_close
async def test_each_fault_ends_with_the_whole_answer_or_a_clear_error(platform: Platform) -> None:
    """The issue's table: a transient fault is retried to the whole answer (never a
    partial one); a 400 and a corrupted chunk fail at once, the room told why."""
    _, _, user = seeded(platform)
    rooms = rooms_with_the_agent(platform, len(ROWS))
    with trio.fail_after(DEADLINE):
        async with (
            stubllm_peer(chunk_delay_ms=5) as llm,
            fault_proxy(llm.url, endless_ceiling=2 * (8 * 2**20 + socket_buffers_max())) as proxy,
        ):
            for text, steps, _, _ in ROWS:
                await plan(proxy, text, steps)
            adapter = OpenAIChatAdapter(proxy.base_url + "/v1", "gpt-4o")
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
            await proxy.wait_for(lambda e: e["how"] == "endless", event="response_end")
    for room, (text, _, outcome, tries) in zip(rooms, ROWS, strict=True):
        assert len(seen[text]) == tries, (text, seen[text])
        if outcome == "failed":
            assert status(platform, sent[text]) == "failed", text
            assert replies(platform, room) == [], text
            assert len(errors_posted(platform, room)) == 1, text
        else:
            assert status(platform, sent[text]) == "processed", text
            assert replies(platform, room) == [outcome], text  # once, and whole
            assert errors_posted(platform, room) == [], text
    # never before Retry-After: the attempts after a `Retry-After: 1` came a second later
    times = [e["perf"] for e in seen["[quick] 429 twice"]]
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times)), times
    # the room reads why, in words
    [why] = errors_posted(platform, rooms[2])
    assert "answered 400" in why and "bad" in why
    [why] = errors_posted(platform, rooms[5])
    assert "not JSON" in why
    [why] = errors_posted(platform, rooms[-1])
    assert "ran past the 8388608-byte limit" in why  # read up to max_body, then dropped
    # the client dropped each endless answer: the proxy's send failed before its ceiling,
    # after at most the limit plus what the two kernels' socket buffers can hold
    ended = [e for e in proxy.events("response_end") if e["how"] == "endless"]
    assert len(ended) == 2 and all(e["dropped"] for e in ended), ended
    assert all(e["sent"] <= 8 * 2**20 + socket_buffers_max() for e in ended), ended


def socket_buffers_max() -> int:
    """The most loopback TCP can hold between a sender and a reader that stopped: the
    sender's send buffer and the reader's receive buffer at their autotuned maximum
    (the third figure of each sysctl), plus a chunk's slack."""
    wmem = int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])
    rmem = int(Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split()[2])
    return wmem + rmem + 2**20


async def failed_turn(
    platform: Platform, text: str, steps: list[dict[str, Any]]
) -> tuple[int, str]:
    """Post `text` with these faults planned; once its message failed: the attempts the
    proxy saw and the room's one error event."""
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with stubllm_peer() as llm, fault_proxy(llm.url) as proxy:
            await plan(proxy, text, steps)
            adapter = OpenAIChatAdapter(proxy.base_url + "/v1", "gpt-4o")
            async with running_agent(platform, adapter, policy=FAST):
                message = platform.post_message(room, user, text)
                await platform.wait_until(lambda: status(platform, message) == "failed")
            made = len(attempts(proxy, text))
    [why] = errors_posted(platform, room)
    return made, why


async def test_a_retry_after_past_the_cap_fails_at_once_and_says_so(platform: Platform) -> None:
    made, why = await failed_turn(platform, "[quick] later", [{"status": 429, "retry_after": 120}])
    assert made == 1
    assert "Retry-After 120 s" in why and "60 s" in why


async def test_a_429_storm_is_asked_at_most_attempts_times(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    """...and the failed turn is one WARNING line for the operator (no traceback: that
    is at DEBUG) and one error event in words for the room."""
    caplog.set_level(logging.DEBUG, logger="band_trio")
    storm = [{"status": 429, "retry_after_ms": 20}] * 10
    made, why = await failed_turn(platform, "[quick] storm", storm)
    assert made == 3
    assert why == (
        "Could not answer: the model provider answered 429 three times; last Retry-After 0.02 s."
    )
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(": ", 2)[-1] for r in warnings] == [
        "OpenAIChatError: the model provider answered 429 three times; last Retry-After 0.02 s"
    ]
    assert warnings[0].exc_info is None
    [traceback] = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert "adapter failed" in traceback.getMessage()


async def test_an_interrupt_during_the_backoff_wait_cancels_it_at_once(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with stubllm_peer() as llm, fault_proxy(llm.url) as proxy:
            await plan(proxy, "[quick] wait", [{"status": 503, "retry_after": "10"}])
            adapter = Watched(proxy.base_url + "/v1", "gpt-4o")
            async with running_agent(platform, adapter, policy=FAST):
                message = platform.post_message(room, user, "[quick] wait")
                await proxy.wait_for(event="response_end", how="injected", timeout=DEADLINE)
                await trio.testing.wait_all_tasks_blocked(0.05)  # in the backoff's sleep
                sent = time.perf_counter()
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                await adapter.cancelled.wait()
                took = adapter.cancelled_at - sent
                await platform.wait_until(lambda: status(platform, message) == "processed")
            assert len(attempts(proxy, "[quick] wait")) == 1  # never asked again
    assert replies(platform, room) == []
    assert took < 5  # far less than the 10 s Retry-After: the sleep was cancelled
    print(f"interrupt -> cancelled during a backoff: {took * 1000:.2f} ms")


class Watched(OpenAIChatAdapter):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cancelled = trio.Event()
        self.cancelled_at = 0.0

    async def on_turn(self, turn: Turn) -> None:
        try:
            await super().on_turn(turn)
        except trio.Cancelled:
            self.cancelled_at = time.perf_counter()
            self.cancelled.set()
            raise
