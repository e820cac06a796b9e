"""The remote-stop scenarios against real peers: signal → the peer itself saw the stop.

* stubllm: the held turn streams a slow chat completion (80 chunks, 50 ms
  apart); the interval ends at the server's stamp of its streaming generator
  being cancelled (the client went away).
* a2a-sdk: the held turn streams a long A2A task; the interval ends at the
  server's stamp of the task saved `TASK_STATE_CANCELED` (a `CancelTask`
  arrived and was carried out).

band-trio runs the reference adapters (`openai_chat`, `a2a`); the band-sdk
subject streams with httpx and, for A2A, sends `tasks/cancel` on
`CancelledError` — what its author would have to write (`_sdk_subject`).
"""

from __future__ import annotations

import trio

from ._bench import since, timed
from ._peer import Event, Peer
from ._protocol import A2A, LLM
from ._tier import Tier

__all__ = ["a2a_trial", "llm_trial"]

LLM_PROMPT = "[slow] tell me a long story"
A2A_PROMPT = "mode=normal chunks=2000 delay=0.02"


async def _signal_and_wait(tier: Tier, message: str) -> tuple[int, float | None]:
    bench, agent = tier.bench, tier.identity.agent_id
    await trio.sleep(bench.options.settle)
    position = bench.watch.position
    bench.platform.send_control(agent, "interrupt", room_id=tier.target)
    sent = await timed(
        bench.options.deadline, lambda: bench.watch.wait(("control", agent), position)
    )
    return position, sent


async def llm_trial(tier: Tier, peer: Peer) -> None:
    bench, deadline = tier.bench, tier.bench.options.deadline
    series = bench.metric(
        tier.runtime, "remote stop: stubllm", tier.rooms,
        "interrupt → stubllm generator cancelled", "push",
    )  # fmt: skip
    since_event = len(peer.events)
    message = bench.post(tier.target, f"{LLM} {peer.ready['base_url']} {LLM_PROMPT}")
    started = await timed(
        deadline, lambda: peer.wait(since_event, lambda e: e.get("event") == "stream_started")
    )
    if started is None:
        series.add(None, "the stream never started")
        return
    req = started["req"]

    def streaming(e: Event) -> bool:
        return e.get("event") == "chunk" and e.get("req") == req and int(e["count"]) >= 3

    if await timed(deadline, lambda: peer.wait(since_event, streaming)) is None:
        series.add(None, "the stream sent no chunks")
        return
    position, sent = await _signal_and_wait(tier, message)
    cancelled = await timed(
        deadline,
        lambda: peer.wait(
            since_event, lambda e: e.get("event") == "stream_cancelled" and e.get("req") == req
        ),
    )
    series.add(since(cancelled["perf"] if cancelled else None, sent), "the stream went on")
    await timed(deadline, lambda: bench.watch.wait(("processed", message), position))


async def a2a_trial(tier: Tier, peer: Peer) -> None:
    bench, deadline = tier.bench, tier.bench.options.deadline
    series = bench.metric(
        tier.runtime, "remote stop: a2a", tier.rooms,
        "interrupt → a2a-sdk task CANCELED", "push",
    )  # fmt: skip
    since_event = len(peer.events)
    message = bench.post(tier.target, f"{A2A} {peer.ready['url']} {A2A_PROMPT}")
    started = await timed(
        deadline, lambda: peer.wait(since_event, lambda e: e.get("event") == "execute_started")
    )
    if started is None:
        series.add(None, "the task never started")
        return
    task = started["task_id"]

    def streaming(e: Event) -> bool:
        return e.get("event") == "chunk_sent" and e.get("task_id") == task and int(e["index"]) >= 1

    if await timed(deadline, lambda: peer.wait(since_event, streaming)) is None:
        series.add(None, "the task streamed nothing")
        return
    position, sent = await _signal_and_wait(tier, message)

    def terminal(e: Event) -> bool:
        return e.get("event") == "terminal" and e.get("task_id") == task

    ended = await timed(deadline, lambda: peer.wait(since_event, terminal))
    if ended is not None and ended.get("state") != "TASK_STATE_CANCELED":
        series.add(None, f"the task ended {ended.get('state')}")
    else:
        series.add(since(ended["perf"] if ended else None, sent), "the task was never canceled")
    await timed(deadline, lambda: bench.watch.wait(("processed", message), position))
