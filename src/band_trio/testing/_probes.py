"""The conformance probes: does an adapter stop when the room's users say so?

Each probe is a plain async function `probe(subject) -> ProbeResult`: it opens
a kit of its own (the embedded platform and an agent running the adapter),
plays a short script in the room over real sockets, and reports what it saw.
A probe that does not apply to the adapter (no remote work, say) returns
`not applicable` with the reason — never a silent pass. Every probe has a
deliberately broken adapter in band-trio's own tests that it fails on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps

import trio

from ._kit import Kit, ProbeFailed, ProbeResult, Subject, open_kit

__all__ = ["PROBES", "Probe", "run_probes"]

Probe = Callable[[Subject], Awaitable[ProbeResult]]
Body = Callable[[Kit], Awaitable[ProbeResult]]

PROBES: list[Probe] = []
"""Every probe, in the order `run_probes` runs them."""


def _probe(name: str, *, leaks: bool = False) -> Callable[[Body], Probe]:
    """Make `body(kit)` a probe: a kit of its own, failures reported, not raised."""

    def decorate(body: Body) -> Probe:
        @wraps(body)
        async def probe(subject: Subject) -> ProbeResult:
            try:
                async with open_kit(subject) as kit:
                    result = await body(kit)
            except Exception as exc:
                failed = _failure(exc)
                if failed is not None:
                    return ProbeResult(name, "failed", str(failed))
                # the adapter (or its peer) broke the script
                return ProbeResult(name, "failed", f"the probe could not run: {exc!r}")
            if leaks and result.outcome == "passed" and kit.notes:
                return ProbeResult(name, "failed", "; ".join(kit.notes), result.latency)
            return ProbeResult(name, result.outcome, result.observed, result.latency)

        PROBES.append(probe)
        return probe

    return decorate


def _failure(exc: BaseException) -> ProbeFailed | None:
    """The `ProbeFailed` in `exc`, through the groups of the kit's nurseries."""
    if isinstance(exc, ProbeFailed):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _failure(inner)) is not None:
                return found
    return None


def _passed(observed: str, latency: float | None = None) -> ProbeResult:
    return ProbeResult("", "passed", observed, latency)


def _not_applicable(why: str) -> ProbeResult:
    return ProbeResult("", "not applicable", why)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


@_probe("interrupt mid-work")
async def interrupt_mid_work(kit: Kit) -> ProbeResult:
    """The adapter sees the cancel within the cleanup grace; the message is consumed;
    nothing is posted after the signal."""
    message = kit.post(kit.subject.long_prompt)
    record = await kit.at_work(message)
    sent = kit.signal("interrupt")
    await kit.until(lambda: not record.running, "the adapter's turn did not end after interrupt")
    assert record.ended is not None
    took = record.ended - sent
    if record.ending != "cancelled":
        raise ProbeFailed(f"the turn {record.ending} instead of letting the cancel through")
    grace = kit.subject.policy.cleanup_grace
    if took > grace:
        raise ProbeFailed(f"the adapter took {_ms(took)} to end its turn (grace {grace:g}s)")
    await kit.until(lambda: kit.status(message) == "processed", "the message was not consumed")
    if posted := kit.posts_since(sent):
        raise ProbeFailed(f"posted after the interrupt: {posted}")
    return _passed(f"cancelled {_ms(took)} after the signal; consumed; nothing posted", took)


@_probe("stop mid-work, then play")
async def stop_then_play(kit: Kit) -> ProbeResult:
    """The message is left `processing`; after play the adapter is entered again for it."""
    message = kit.post(kit.subject.long_prompt)
    record = await kit.at_work(message)
    kit.signal("stop")
    await kit.until(lambda: not record.running, "the adapter's turn did not end after stop")
    await kit.until(lambda: kit.agent.rooms[kit.room_id].running is None, "the turn never settled")
    if (status := kit.status(message)) != "processing":
        raise ProbeFailed(f"after stop the message is {status!r}, not 'processing'")
    played = kit.signal("play")
    await kit.until(lambda: len(kit.adapter.of(message)) == 2, "not entered again after play")
    again = kit.adapter.of(message)[1]
    kit.signal("interrupt")  # end the replay: this probe is done with it
    await kit.until(lambda: kit.status(message) == "processed", "the replay was not consumed")
    took = again.entered - played
    return _passed(f"left processing; entered again {_ms(took)} after play", took)


@_probe("remote stop sent once per abort")
async def remote_stop_once(kit: Kit) -> ProbeResult:
    """Each started remote work of an aborted turn gets exactly one stop."""
    message = kit.post(kit.subject.long_prompt)
    record = await kit.at_work(message)
    started = [work for work in record.turn.remote_works if work.is_started]
    if not started:
        kit.signal("interrupt")
        return _not_applicable("the adapter registered no remote work (turn.remote) that started")
    kit.signal("interrupt")
    await kit.until(lambda: not record.running, "the adapter's turn did not end after interrupt")
    stops = record.turn.remote_stops
    unstopped = [work.name for work in started if work.stop_result is None]
    if unstopped or len(stops) != len(started):
        raise ProbeFailed(f"{len(started)} remote work(s) started, {len(stops)} stop(s) sent")
    outcomes = ", ".join(f"{s.name}: {s.outcome.value}" for s in stops)
    took = max(stop.waited + stop.took for stop in stops)
    return _passed(f"one stop per started work ({outcomes})", took)


@_probe("a stop after the remote work finished sends nothing")
async def nothing_after_finish(kit: Kit) -> ProbeResult:
    """The reply of a quick turn is held; the remote work is over; an interrupt then
    must not stop it again."""
    hold = kit.platform.faults.hold_rest("post_message")
    message = kit.post(kit.subject.quick_prompt)
    with trio.move_on_after(kit.subject.deadline):
        await hold.arrived.wait()
    record = kit.adapter.of(message)[-1] if kit.adapter.of(message) else None
    if record is None or not hold.arrived.is_set():
        hold.release()
        raise ProbeFailed("the quick prompt was never answered")
    works = record.turn.remote_works
    if not works:
        hold.release()
        return _not_applicable("the adapter registered no remote work for the quick prompt")
    if not all(work.is_finished for work in works):
        hold.release()
        raise ProbeFailed("the remote work was still open when the adapter replied")
    kit.signal("interrupt")
    await kit.until(lambda: kit.agent.signals.applied == 1, "the interrupt never arrived")
    hold.release()
    await kit.until(lambda: not record.running, "the adapter's turn did not end")
    if stops := record.turn.remote_stops:
        raise ProbeFailed(f"a stop was sent for finished work: {[s.name for s in stops]}")
    return _passed("no stop sent for remote work that had finished")


@_probe("the next turn waits for the previous stop")
async def next_turn_waits(kit: Kit) -> ProbeResult:
    """A message queued behind an aborted turn starts only once that turn has ended,
    its remote stop settled."""
    first = kit.post(kit.subject.long_prompt)
    record = await kit.at_work(first)
    second = kit.post(kit.subject.quick_prompt)
    kit.signal("interrupt")
    await kit.until(lambda: bool(kit.adapter.of(second)), "the next message never started")
    after = kit.adapter.of(second)[0]
    if record.ended is None or after.entered < record.ended:
        raise ProbeFailed("the next turn started while the aborted one was still running")
    gap = after.entered - record.ended
    return _passed(f"the next turn started {_ms(gap)} after the aborted one ended", gap)


@_probe("leaving the room waits for the stop")
async def leave_waits(kit: Kit) -> ProbeResult:
    """Leaving the room mid-turn ends the turn (its remote stop settled) before the
    adapter is told the room is gone."""
    message = kit.post(kit.subject.long_prompt)
    record = await kit.at_work(message)
    kit.leave()
    await kit.until(lambda: bool(kit.adapter.left), "on_room_left was never called")
    left = kit.adapter.left[0].at
    if record.ended is None or left < record.ended:
        raise ProbeFailed("on_room_left ran while the turn was still running")
    if record.ending != "cancelled":
        raise ProbeFailed(f"the turn {record.ending} instead of letting the cancel through")
    if kit.status(message) != "processing":
        raise ProbeFailed(f"leaving left the message {kit.status(message)!r}, not 'processing'")
    return _passed(f"the turn ended {_ms(left - record.ended)} before on_room_left", None)


@_probe("a swallowed cancellation is reported")
async def swallowed_cancel(kit: Kit) -> ProbeResult:
    """An adapter that catches the cancel is never counted as a success: after stop its
    message stays `processing`, and an adapter that keeps working is reported."""
    message = kit.post(kit.subject.long_prompt)
    record = await kit.at_work(message)
    kit.signal("stop")
    grace = kit.subject.policy.cleanup_grace
    with trio.move_on_after(grace * 2 + kit.subject.policy.backend_stop_grace):
        await kit.adapter.wait_for(lambda: not record.running)
    await kit.until(lambda: kit.agent.rooms[kit.room_id].running is None, "the turn never settled")
    if kit.status(message) != "processing":
        raise ProbeFailed(f"a stopped turn's message became {kit.status(message)!r}")
    if record.running:
        raise ProbeFailed("the adapter ignored the stop and is still at work")
    if record.ending != "cancelled":
        raise ProbeFailed(f"the adapter swallowed the cancellation: its turn {record.ending}")
    return _passed("the cancel went through; the message stays processing")


@_probe("nothing left after the agent stops", leaks=True)
async def nothing_left(kit: Kit) -> ProbeResult:
    """No task, client socket or child process outlives the agent (checked on exit)."""
    quick = kit.post(kit.subject.quick_prompt)
    await kit.until(lambda: kit.status(quick) in ("processed", "failed"), "no answer")
    message = kit.post(kit.subject.long_prompt)
    await kit.at_work(message)
    kit.signal("interrupt")
    await kit.until(lambda: kit.status(message) == "processed", "the message was not consumed")
    return _passed("no task, socket or child process left")


@_probe("the reason of the last interrupt reaches the next turn")
async def reason_reaches_next_turn(kit: Kit) -> ProbeResult:
    """`Turn.last_abort` of the room's next turn carries the interrupt's kind and reason."""
    reason = "conformance kit: answer more briefly"
    message = kit.post(kit.subject.long_prompt)
    await kit.at_work(message)
    kit.signal("interrupt", reason=reason)
    await kit.until(lambda: kit.status(message) == "processed", "the message was not consumed")
    after = kit.post(kit.subject.quick_prompt)
    await kit.until(lambda: bool(kit.adapter.of(after)), "the next message never started")
    told = kit.adapter.of(after)[0].turn.last_abort
    if told is None or (told.kind, told.reason, told.message_id) != ("interrupt", reason, message):
        raise ProbeFailed(f"the next turn was told {told!r}")
    return _passed(f"the next turn was told: {told.kind}, {told.reason!r}")


async def run_probes(
    subject: Subject,
    probes: list[Probe] | None = None,
    *,
    progress: Callable[[ProbeResult], None] | None = None,
) -> list[ProbeResult]:
    """Run `probes` (every probe by default) against `subject`, one after another."""
    results = []
    for probe in probes if probes is not None else PROBES:
        result = await probe(subject)
        results.append(result)
        if progress is not None:
            progress(result)
    return results
