"""A property over real peers: whatever sequence of faults the model provider's attempts
meet, the room gets at most one answer, it is whole, and the message ends as the
retry rules say (answered, or failed with one error event).

Hypothesis draws a fault plan per message (statuses, resets, drops, early ends,
corrupted chunks, stalls); the project's fault-injecting proxy plays it in front of
one real stubllm for the whole module, and each example runs an embedded platform
and an agent with the OpenAI adapter in a trio run of its own.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from band_trio import Policy, UpstreamPolicy
from band_trio.adapters import OpenAIChatAdapter
from band_trio.platform import open_platform
from peers import FAULT_PROXY_SCRIPT, STUBLLM_FIXTURES, STUBLLM_SCRIPT, plan
from seed_rotation import examples
from support import replies, rooms_with_the_agent, running_agent, status

SLOW = " ".join(f"w{i:02d}" for i in range(80))  # stubllm's "[slow]" answer, 80 chunks
ATTEMPTS = 3
POLICY = Policy(
    upstream=UpstreamPolicy(attempts=ATTEMPTS, read_timeout=1.0, retry_base=0.01, retry_cap=0.05),
)

TRANSIENT = st.one_of(
    st.sampled_from([{"status": s} for s in (500, 502, 503, 529)]),
    st.just({"status": 429, "retry_after_ms": 10}),
    st.just({"reset": True}),
    st.just({"stall": True}),
    st.builds(lambda k: {"drop_after": k}, st.integers(0, 5)),
    st.builds(lambda k: {"end_after": k}, st.integers(0, 5)),
    st.builds(lambda k: {"stall_after": k}, st.integers(1, 5)),
)
FINAL = st.one_of(
    st.sampled_from([{"status": s} for s in (400, 401, 404, 422)]),
    st.builds(lambda k: {"corrupt": k}, st.integers(0, 3)),
)
STEP = st.one_of(TRANSIENT, FINAL, st.just({"pass": True}))
PLANS = st.lists(st.lists(STEP, max_size=4), min_size=1, max_size=3)


def expected(steps: list[dict[str, Any]]) -> tuple[str, int]:
    """What the rules say: ("answered" | "failed", the attempts the provider sees)."""
    for made in range(1, ATTEMPTS + 1):
        step = steps[made - 1] if made <= len(steps) else {"pass": True}
        if step.get("pass"):
            return "answered", made
        if "corrupt" in step or step.get("status", 0) in (400, 401, 404, 422):
            return "failed", made
    return "failed", ATTEMPTS


class Spawned:
    """A peer script run by this module, outside any trio run (it outlives examples)."""

    def __init__(self, name: str, script: Path, args: list[str]) -> None:
        self.work = Path(tempfile.mkdtemp(prefix=f"band-trio-{name}-"))
        ready, events = self.work / "ready.json", self.work / "events.jsonl"
        argv = [sys.executable, str(script), "--port", "0", "--ready-file", str(ready)]
        with (self.work / "stderr").open("wb") as stderr:  # the child keeps its own copy
            self.process = subprocess.Popen(
                [*argv, "--events-file", str(events), *args],
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        deadline = time.monotonic() + 20
        while not ready.exists():  # the script writes it once it listens
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start: {(self.work / 'stderr').read_text()}")
            time.sleep(0.01)
        self.ready = json.loads(ready.read_text())
        self.events = events

    @property
    def port(self) -> int:
        return int(self.ready["port"])

    def records(self, name: str) -> list[dict[str, Any]]:
        """The events the script wrote so far named `name`."""
        lines = self.events.read_text("utf-8").splitlines() if self.events.exists() else []
        found = [json.loads(line) for line in lines if line.strip()]
        return [e for e in found if e.get("event") == name]

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture(scope="module")
def proxied_llm() -> Iterator[tuple[str, Spawned]]:
    llm = Spawned(
        "stubllm",
        STUBLLM_SCRIPT,
        ["--chunk-delay-ms", "1", "--fixture-file", str(STUBLLM_FIXTURES)],
    )
    try:
        proxy = Spawned("fault-proxy", FAULT_PROXY_SCRIPT, ["--upstream", llm.ready["url"]])
        try:
            yield str(proxy.ready["base_url"]), proxy
        finally:
            proxy.stop()
    finally:
        llm.stop()


EXAMPLE = iter(range(1_000_000))


@pytest.mark.filterwarnings(  # httpx2 2.16.2's body generator, closed early (tests/peers)
    "ignore:Async generator 'httpcore2._async.connection_pool.PoolByteStream.__aiter__'"
    " was garbage collected:ResourceWarning"
)
@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plans=PLANS)
def test_any_faults_end_in_at_most_one_whole_answer_as_the_rules_say(
    proxied_llm: tuple[str, Spawned], plans: list[list[dict[str, Any]]]
) -> None:
    url, proxy = proxied_llm
    example = next(EXAMPLE)
    texts = [f"[slow] property {example}.{i}" for i in range(len(plans))]
    outcome = trio.run(_one_example, url, proxy, texts, plans)
    for text, steps in zip(texts, plans, strict=True):
        state, answers, errors, seen = outcome[text]
        answer, made = expected(steps)
        assert len(answers) <= 1, (text, steps, answers)
        assert answers in ([], [SLOW]), (text, steps, answers)  # whole, never a part
        assert seen == made, (text, steps, seen)
        if answer == "answered":
            assert (state, answers, errors) == ("processed", [SLOW], 0), (text, steps)
        else:
            assert (state, answers, errors) == ("failed", [], 1), (text, steps, state)


async def _one_example(
    url: str, proxy: Spawned, texts: list[str], plans: list[list[dict[str, Any]]]
) -> dict[str, tuple[str | None, list[str], int, int]]:
    for text, steps in zip(texts, plans, strict=True):
        await plan(proxy.port, text, steps)
    with trio.fail_after(60):
        async with open_platform(seed=True) as platform:
            info = platform.info
            assert info.user_id
            rooms = rooms_with_the_agent(platform, len(texts))
            adapter = OpenAIChatAdapter(url + "/v1", "gpt-4o")
            async with running_agent(platform, adapter, policy=POLICY):
                sent = [
                    platform.post_message(room, info.user_id, text)
                    for room, text in zip(rooms, texts, strict=True)
                ]
                for message in sent:
                    await platform.wait_until(
                        lambda m=message: status(platform, m) in ("processed", "failed")
                    )
            requests = [e for e in proxy.records("request") if e["match"] in texts]
            return {
                text: (
                    status(platform, message),
                    replies(platform, room),
                    sum(1 for e in platform.store.events(room) if e["message_type"] == "error"),
                    sum(1 for e in requests if e["match"] == text),
                )
                for text, message, room in zip(texts, sent, rooms, strict=True)
            }


def test_the_model_of_the_rules_is_what_the_test_expects() -> None:
    assert expected([]) == ("answered", 1)
    assert expected([{"status": 503}, {"pass": True}]) == ("answered", 2)
    assert expected([{"status": 503}] * 5) == ("failed", 3)
    assert expected([{"reset": True}, {"status": 400}]) == ("failed", 2)
