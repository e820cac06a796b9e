"""The mass abort: one agent-wide interrupt of a turn in every room, and its floor.

The "agent interrupt" scenario measures the target room's `processed` under a
light load, and later trials abort only the few turns started since the last
one. This one measures the whole wave, the same in every trial: every room of
the tier holds a turn (`bench hold`), and once every turn has entered, one
agent-wide interrupt; each sample is the time from the platform's stamp of
the control frame to the arrival of one aborted turn's `processed` (the
platform's entry stamp), so the row's p50 / p99 / max are the wave's median,
its 99th percentile and its last mark, pooled over the trials.

Its floor, in the same run, trials alternating (`floor_wave`): the bare
client (`_scale_floor`) in as many rooms of its own, one claimed message in
each, sends every `processed` at once over its 32 connections; each sample is
the client's stamp of the wave's start to the arrival of one mark.
"""

from __future__ import annotations

import trio

from ._bare import Bare
from ._bench import poll, since
from ._protocol import HOLD
from ._tier import Tier

__all__ = ["FLOOR_WAVE", "MASS", "WAVE", "floor_wave", "mass_trial"]

MASS = "agent interrupt: all busy"
WAVE = "signal → every processed"
FLOOR_WAVE = "marks at once → every processed"


async def mass_trial(tier: Tier) -> None:
    bench, subject, watch = tier.bench, tier.subject, tier.bench.watch
    series = bench.metric(tier.runtime, MASS, tier.rooms, WAVE)
    messages = [bench.post(room, HOLD) for room in tier.identity.rooms]
    tier.posted.extend(messages)  # `settle` sees every one of them ended
    deadline = bench.options.load_deadline
    with trio.move_on_after(deadline):
        for message in messages:
            await subject.wait("enter", message)
    entered = sum(1 for m in messages if subject.count("enter", m))
    if entered < len(messages):
        series.add(None, f"{entered} of {len(messages)} held turns started in {deadline:.0f} s")
        return
    await trio.sleep(bench.options.settle)
    agent = tier.identity.agent_id
    position = watch.position
    bench.platform.send_control(agent, "interrupt")
    sent: float | None = None
    open_ = set(messages)

    def all_marked() -> bool:
        watch.pump()
        open_.difference_update([m for m in open_ if watch.indexed(("processed", m))])
        return not open_

    with trio.move_on_after(deadline):
        sent = await watch.wait(("control", agent), position)
        await poll(all_marked)
    if sent is None:
        series.add(None, "no control frame")
        return
    for message in messages:
        mark = watch.first_after(("processed", message), position)
        if mark is not None:
            series.add(mark - sent)
    if open_:
        series.add(None, f"{len(open_)} of {len(messages)} aborted turns never marked processed")


async def floor_wave(bare: Bare, marks_in: int | None = None) -> None:
    """One trial of the floor: a claimed message in every room (or the first `marks_in`),
    every mark sent at once."""
    bench, watch = bare.bench, bare.bench.watch
    series = bench.metric("floor", MASS, bare.rooms, FLOOR_WAVE)
    if not bare.ready:
        series.add(None, "the bare client never synced")
        return
    position = watch.position
    rooms = bare.identity.rooms[:marks_in]
    marks = [(room, bench.post(room, "floor")) for room in rooms]
    got = await bare.command(marks, close=False)
    if got is None:
        series.add(None, "the marks were not all answered in time")
        return
    missing = 0
    for _, message in marks:
        mark = watch.first_after(("processed", message), position)
        if mark is None:
            missing += 1
        else:
            series.add(since(mark, got[0]))
    if missing:
        series.add(None, f"{missing} of {len(marks)} marks not stamped")
