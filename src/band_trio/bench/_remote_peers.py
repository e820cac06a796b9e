"""The remote-stop scenarios against real peers: signal → the peer itself saw the stop.

* stubllm: the held turn streams a slow chat completion (80 chunks, 50 ms
  apart); the interval ends at the server's stamp of its streaming generator
  being cancelled (the client went away).
* a2a-sdk: the held turn streams a long A2A task; the interval ends at the
  server's stamp of the task saved `TASK_STATE_CANCELED` (a `CancelTask`
  arrived and was carried out).
* Copilot (band-trio only, when the CLI is installed): the held turn is a prompt in
  a Copilot session of the real CLI, whose model is stubllm; the interval ends at
  stubllm's stamp of its generator cancelled — the CLI closed its model stream
  after the adapter's `session.abort`.
* ACP (band-trio only, when OpenCode is installed): the held turn is a prompt in an
  ACP session of `opencode acp`, whose model is stubllm; the interval ends at
  stubllm's stamp of its generator cancelled — OpenCode closed its model stream
  after the adapter's `session/cancel`.
* Anthropic (band-trio only, when the `anthropic` extra is installed): the held turn
  streams the same slow answer from stubllm's `/v1/messages` with the official
  `anthropic` SDK, run in the turn with no bridge; the interval ends at stubllm's
  stamp of its generator cancelled — next to the stubllm row, band-trio's own stream.

band-trio runs the reference adapters (`openai_chat`, `a2a`); the band-sdk
subject streams with httpx and, for A2A, sends `tasks/cancel` on
`CancelledError` — what its author would have to write (`_sdk_subject`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import trio

from ._bench import since, timed
from ._peer import Event, Peer
from ._protocol import A2A, ACP, ANTHROPIC, COPILOT, LLM
from ._tier import Tier

__all__ = [
    "A2A_SCENARIO",
    "ACP_SCENARIO",
    "ANTHROPIC_SCENARIO",
    "COPILOT_SCENARIO",
    "LLM_SCENARIO",
    "PeerScenario",
    "a2a_trial",
    "acp_trial",
    "anthropic_trial",
    "copilot_trial",
    "llm_trial",
    "peer_trial",
]

LLM_PROMPT = "[slow] tell me a long story"
A2A_PROMPT = "mode=normal chunks=2000 delay=0.02"


@dataclass(frozen=True)
class PeerScenario:
    """What one peer's trial looks for in the peer's own events."""

    scenario: str
    metric: str
    command: str
    url_key: str
    """The `ready` event's field with the URL the adapter is given."""
    prompt: str
    started: str
    """The event that says the remote work began; its `key` names the work."""
    key: str
    progressing: Callable[[Event], bool]
    """Enough of the work has happened to abort it mid-way."""
    ended: str
    """The event that ends the interval (for this work)."""
    ended_well: Callable[[Event], bool] = lambda e: True
    begins: Callable[[Event], bool] = lambda e: True
    """Which of the `started` events is the work's (not a side request of the peer's)."""


def _agent_request(event: Event) -> bool:
    body = event.get("body")
    return isinstance(body, dict) and bool(body.get("tools"))


LLM_SCENARIO = PeerScenario(
    "remote stop: stubllm", "interrupt → stubllm generator cancelled", LLM, "base_url",
    LLM_PROMPT, "stream_started", "req",
    lambda e: e.get("event") == "chunk" and int(e["count"]) >= 3,
    "stream_cancelled",
)  # fmt: skip
A2A_SCENARIO = PeerScenario(
    "remote stop: a2a", "interrupt → a2a-sdk task CANCELED", A2A, "url",
    A2A_PROMPT, "execute_started", "task_id",
    lambda e: e.get("event") == "chunk_sent" and int(e["index"]) >= 1,
    "terminal", lambda e: e.get("state") == "TASK_STATE_CANCELED",
)  # fmt: skip

COPILOT_SCENARIO = PeerScenario(
    "remote stop: copilot", "interrupt → stubllm generator cancelled by the CLI", COPILOT,
    "base_url", LLM_PROMPT, "stream_started", "req",
    lambda e: e.get("event") == "chunk" and int(e["count"]) >= 3,
    "stream_cancelled",
)  # fmt: skip

ACP_SCENARIO = PeerScenario(
    "remote stop: acp", "interrupt → stubllm generator cancelled by opencode acp", ACP,
    "base_url", LLM_PROMPT, "request", "req",
    lambda e: e.get("event") == "chunk" and int(e["count"]) >= 3,
    "stream_cancelled", begins=_agent_request,
)  # fmt: skip
"""OpenCode also asks the model for a new session's title, with the same first message
(so the same `[slow]` answer) and no tools; that request is not the prompt's, and the
cancel does not end it: the trial follows the request that offers the agent's tools."""

ANTHROPIC_SCENARIO = PeerScenario(
    "remote stop: anthropic", "interrupt → stubllm generator cancelled (anthropic SDK)",
    ANTHROPIC, "url", LLM_PROMPT, "stream_started", "req",
    # 3 tokens, as the stubllm row: message_start, content_block_start and ping come first
    lambda e: e.get("event") == "chunk" and int(e["count"]) >= 6,
    "stream_cancelled",
)  # fmt: skip


async def peer_trial(tier: Tier, peer: Peer, how: PeerScenario) -> None:
    """Start remote work on the peer, abort it mid-way, time the peer's own record."""
    bench, deadline, agent = tier.bench, tier.bench.options.deadline, tier.identity.agent_id
    series = bench.metric(tier.runtime, how.scenario, tier.rooms, how.metric, "push")
    first = len(peer.events)
    message = bench.post(tier.target, f"{how.command} {peer.ready[how.url_key]} {how.prompt}")

    def started(e: Event) -> bool:
        return e.get("event") == how.started and how.begins(e)

    begun = await timed(deadline, lambda: peer.wait(first, started))
    if begun is None:
        series.add(None, "the remote work never started")
        return
    work = begun[how.key]

    def progressing(e: Event) -> bool:
        return e.get(how.key) == work and how.progressing(e)

    def ended(e: Event) -> bool:
        return e.get("event") == how.ended and e.get(how.key) == work

    if await timed(deadline, lambda: peer.wait(first, progressing)) is None:
        series.add(None, "the remote work made no progress")
        return
    await trio.sleep(bench.options.settle)
    position = bench.watch.position
    bench.platform.send_control(agent, "interrupt", room_id=tier.target)
    sent = await timed(deadline, lambda: bench.watch.wait(("control", agent), position))
    end = await timed(deadline, lambda: peer.wait(first, ended))
    if end is not None and not how.ended_well(end):
        series.add(None, f"the remote work ended {end}")
    else:
        series.add(since(end["perf"] if end else None, sent), "the remote work went on")
    await timed(deadline, lambda: bench.watch.wait(("processed", message), position))


async def llm_trial(tier: Tier, peer: Peer) -> None:
    await peer_trial(tier, peer, LLM_SCENARIO)


async def a2a_trial(tier: Tier, peer: Peer) -> None:
    await peer_trial(tier, peer, A2A_SCENARIO)


async def copilot_trial(tier: Tier, peer: Peer) -> None:
    await peer_trial(tier, peer, COPILOT_SCENARIO)


async def acp_trial(tier: Tier, peer: Peer) -> None:
    await peer_trial(tier, peer, ACP_SCENARIO)


async def anthropic_trial(tier: Tier, peer: Peer) -> None:
    await peer_trial(tier, peer, ANTHROPIC_SCENARIO)
