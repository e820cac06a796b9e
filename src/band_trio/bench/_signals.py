"""The signal trials: room interrupt, agent-wide interrupt, stop then play, and an
interrupt during an approval wait (`Turn.ask`, band-trio only).

Every trial holds one turn in the tier's target room (`bench hold`), lets it
run for `Options.settle`, then sends the signal through the platform, which
stamps the outgoing `agent.control` frame: every interval starts there. The
ends are the agent's own stamps (its adapter saw the cancel, re-entered) and
the platform's entry stamps of the REST calls that follow (`processed`,
`working: false`, `/next`).
"""

from __future__ import annotations

import trio

from ._bench import since, timed
from ._protocol import ASK, HOLD
from ._tier import Tier

__all__ = ["ask_trial", "interrupt_trial", "stop_play_trial"]

QUESTION = "Question q-"
"""How the agent's question post starts (`band_trio._question_format`)."""


async def _held(tier: Tier) -> str | None:
    """Post a held turn to the target room; its id once the adapter is in it."""
    bench = tier.bench
    message = bench.post(tier.target, HOLD)
    if await timed(bench.options.deadline, lambda: tier.subject.wait("enter", message)) is None:
        return None
    await trio.sleep(bench.options.settle)
    return message


async def _signal(tier: Tier, mode: str, *, agent_wide: bool = False) -> tuple[int, float | None]:
    """Send `mode`; the log position before it and the stamp of its frame."""
    bench, agent = tier.bench, tier.identity.agent_id
    position = bench.watch.position
    room = None if agent_wide else tier.target
    bench.platform.send_control(agent, mode, room_id=room)  # type: ignore[arg-type]
    frame = await timed(
        bench.options.deadline, lambda: bench.watch.wait(("control", agent), position)
    )
    return position, frame


async def interrupt_trial(tier: Tier, *, agent_wide: bool) -> None:
    bench, subject = tier.bench, tier.subject
    scenario = "agent interrupt" if agent_wide else "interrupt"
    cancelled = bench.metric(
        tier.runtime, scenario, tier.rooms, "signal → adapter cancelled", "push"
    )
    processed = bench.metric(
        tier.runtime, scenario, tier.rooms, "signal → processed arrives", "push+rest_in"
    )
    message = await _held(tier)
    if message is None:
        cancelled.add(None, "the held turn never started")
        processed.add(None, "the held turn never started")
        return
    position, sent = await _signal(tier, "interrupt", agent_wide=agent_wide)
    deadline = bench.options.deadline
    cancel = await timed(deadline, lambda: subject.wait("cancel", message))
    mark = await timed(deadline, lambda: bench.watch.wait(("processed", message), position))
    cancelled.add(since(cancel, sent), "no cancel seen by the adapter")
    processed.add(since(mark, sent), "no processed mark")


async def stop_play_trial(tier: Tier) -> None:
    bench, subject, watch = tier.bench, tier.subject, tier.bench.watch
    agent, room, n, runtime = tier.identity.agent_id, tier.target, tier.rooms, tier.runtime
    deadline = bench.options.deadline
    cancelled = bench.metric(runtime, "stop", n, "signal → adapter cancelled", "push")
    idle = bench.metric(runtime, "stop", n, "signal → working:false arrives", "push+rest_in")
    at_next = bench.metric(runtime, "play", n, "signal → /next arrives", "push+rest_in")
    entered = bench.metric(runtime, "play", n, "signal → adapter re-entered", "push+2rtt")
    message = await _held(tier)
    if message is None:
        for series in (cancelled, idle, at_next, entered):
            series.add(None, "the held turn never started")
        return
    position, sent = await _signal(tier, "stop")
    cancel = await timed(deadline, lambda: subject.wait("cancel", message))
    reported = await timed(deadline, lambda: watch.wait(("idle", agent, room), position))
    cancelled.add(since(cancel, sent), "no cancel seen by the adapter")
    await trio.sleep(bench.options.settle)
    marked = [m for m in ("processed", "failed") if watch.first_after((m, message), position)]
    status = bench.platform.delivery(message)[agent]["status"]
    if marked or status != "processing":  # a stopped message keeps its claim: no mark
        idle.add(None, f"stopped message marked {marked or status}")
    else:
        idle.add(since(reported, sent), "no working:false")
    position, sent = await _signal(tier, "play")
    fetched = await timed(deadline, lambda: watch.wait(("next", agent, room), position))
    again = await timed(deadline, lambda: subject.wait("enter", message, nth=2))
    at_next.add(since(fetched, sent), "no /next after play")
    entered.add(since(again, sent), "not re-entered after play")
    position, _ = await _signal(tier, "interrupt")  # end the replayed turn, unmeasured
    await timed(deadline, lambda: watch.wait(("processed", message), position))


async def ask_trial(tier: Tier) -> None:
    """Interrupt a turn waiting in `Turn.ask` for an answer: frame stamp → the adapter's
    `except Cancelled` around the wait. band-sdk has no `ask`: its tier runs nothing here,
    and the plain interrupt rows of the same run are the comparison."""
    if tier.runtime != "band-trio":
        return
    bench, subject = tier.bench, tier.subject
    ended = bench.metric(
        tier.runtime, "interrupt: approval wait", tier.rooms,
        "signal → approval wait ended", "push",
    )  # fmt: skip
    agent, deadline = tier.identity.agent_id, bench.options.deadline
    asked_before = _questions(tier)
    message = bench.post(tier.target, ASK)
    if await timed(deadline, lambda: subject.wait("enter", message)) is None:
        ended.add(None, "the asking turn never started")
        return

    async def question_posted() -> float:
        await bench.platform.wait_until(lambda: _questions(tier) > asked_before)
        return 0.0

    if await timed(deadline, question_posted) is None:
        ended.add(None, f"{agent} never posted its question")
        return
    await trio.sleep(bench.options.settle)  # the wait under way, as a held turn's
    position, sent = await _signal(tier, "interrupt")
    cancel = await timed(deadline, lambda: subject.wait("cancel", message))
    ended.add(since(cancel, sent), "no cancel seen by the asking adapter")
    await timed(deadline, lambda: bench.watch.wait(("processed", message), position))


def _questions(tier: Tier) -> int:
    agent = tier.identity.agent_id
    messages = tier.bench.platform.messages(tier.target)
    return sum(1 for m in messages if m.sender_id == agent and m.content.startswith(QUESTION))
