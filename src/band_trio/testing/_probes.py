"""The conformance probes: does an adapter stop when the room's users say so?

Each probe is a plain async function `probe(subject) -> ProbeResult`: it opens
a kit of its own (the embedded platform and an agent running the adapter),
plays a short script in the room over real sockets, and reports what it saw.
A probe that does not apply to the adapter (no remote work, say) returns
`not applicable` with the reason — never a silent pass. Every probe has a
deliberately broken adapter in band-trio's own tests that it fails on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial, wraps

import trio

from ..contract import ASYNCIO_WORK, StopOutcome, Turn
from ..policy import WhileBusy
from ._bounded import run_bounded, run_here
from ._kit import Kit, ProbeFailed, ProbeResult, Subject, open_kit
from ._progress import progress as probe_progress
from ._transcript import tool_calls, transcript_problems

__all__ = ["PROBES", "Probe", "run_probes"]

Probe = Callable[[Subject], Awaitable[ProbeResult]]
Body = Callable[[Kit], Awaitable[ProbeResult]]

PROBES: list[Probe] = []
"""Every probe, in the order `run_probes` runs them."""


def _probe(
    name: str, *, leaks: bool = False, while_busy: WhileBusy | None = None
) -> Callable[[Body], Probe]:
    """Make `body(kit)` a probe: a kit of its own, failures reported, not raised.

    The verdict is told to the probe's progress (`_progress`) as soon as the script
    has it, before the kit stops the agent: a kit that then never closes (an adapter
    that never lets the cancel in) still reports what the script saw."""

    def decorate(body: Body) -> Probe:
        @wraps(body)
        async def probe(subject: Subject) -> ProbeResult:
            state = probe_progress()
            try:
                async with open_kit(subject, while_busy=while_busy) as kit:
                    try:
                        result = await body(kit)
                    except BaseException as exc:
                        if state is not None and (failed := _failure(exc)) is not None:
                            state.reached(ProbeResult(name, "failed", str(failed)))
                        raise
                    if state is not None:
                        state.reached(ProbeResult(name, result.outcome, result.observed))
            except Exception as exc:
                failed = _failure(exc)
                if failed is not None:
                    return ProbeResult(name, "failed", str(failed))
                # the adapter (or its peer) broke the script
                return ProbeResult(name, "failed", f"the probe could not run: {exc!r}")
            if leaks and result.outcome == "passed" and kit.notes:
                return ProbeResult(name, "failed", "; ".join(kit.notes), result.latency)
            return ProbeResult(name, result.outcome, result.observed, result.latency)

        probe.probe_name = name  # type: ignore[attr-defined]
        PROBES.append(probe)
        return probe

    return decorate


async def _first_of(wait: Callable[[], Awaitable[object]], done: trio.CancelScope) -> None:
    await wait()
    done.cancel()


def probe_name(probe: Probe) -> str:
    """The name a probe reports under (its function's name for one not made here)."""
    name: str = getattr(probe, "probe_name", getattr(probe, "__name__", repr(probe)))
    return name


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
    _asyncio_stopped(record.turn)
    grace = kit.subject.policy.cleanup_grace
    if took > grace:
        raise ProbeFailed(f"the adapter took {_ms(took)} to end its turn (grace {grace:g}s)")
    await kit.until_status(message, "processed", "the message was not consumed")
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
    await kit.until_status(message, "processed", "the replay was not consumed")
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


@_probe("stop before the remote handle exists")
async def stop_before_handle(kit: Kit) -> ProbeResult:
    """An interrupt that lands while the start call is still in flight: what the start
    created is stopped once its handle is known, never orphaned."""
    tries = 5
    for _ in range(tries):
        result = await _interrupt_the_start(kit)
        if result is not None:
            return result
    return _not_applicable(f"in {tries} tries the start call always finished before a signal")


async def _interrupt_the_start(kit: Kit) -> ProbeResult | None:
    """One try: interrupt as soon as the turn registers remote work. None if the start
    finished before the signal landed (the race was lost: try again)."""
    message = kit.post(kit.subject.long_prompt)
    await kit.until(lambda: bool(kit.adapter.of(message)), "the adapter was never entered")
    record = kit.adapter.of(message)[-1]
    with trio.move_on_after(kit.subject.settle):
        while not record.turn.remote_works and record.running:
            await record.turn.wait_remote_change()
    works = record.turn.remote_works
    early = bool(works) and not works[0].is_started  # the start call is in flight
    kit.signal("interrupt")
    await kit.until(lambda: not record.running, "the turn did not end after interrupt")
    await kit.until_status(message, "processed", "the message was not consumed")
    if not works:
        return _not_applicable("the adapter registered no remote work (turn.remote)")
    work = works[0]
    started, aborted = work.started_at, work.aborted_at
    if not early or (started is not None and aborted is not None and started <= aborted):
        return None
    if work.stop_result is None:
        raise ProbeFailed(
            "the interrupt landed during the start call and no stop was sent: what the "
            "start created is orphaned (start inside `with work.starting():`)"
        )
    if work.stop_result.handle == "-":
        if not work.closes_on_cancel:
            raise ProbeFailed(f"the start call was cut off: {work.stop_result.detail}")
        return _passed("the start was cut off, closing its connection: that is its stop")
    waited = work.stop_result.waited
    return _passed(f"the stop went out {_ms(waited)} after the abort, with the handle", waited)


@_probe("a stop after the remote work finished sends nothing")
async def nothing_after_finish(kit: Kit) -> ProbeResult:
    """The reply of a quick turn is held; the remote work is over; an interrupt then
    must not stop it again."""
    hold = kit.platform.faults.hold_rest("post_message")
    message = kit.post(kit.subject.quick_prompt)

    def ended_unanswered() -> bool:
        records = kit.adapter.of(message)
        return bool(records) and not records[-1].running and not hold.arrived.is_set()

    with trio.move_on_after(kit.subject.deadline):
        async with trio.open_nursery() as either:  # the answer, or a turn that ended without
            for wait in (hold.arrived.wait, partial(kit.adapter.wait_for, ended_unanswered)):
                either.start_soon(_first_of, wait, either.cancel_scope)
    record = kit.adapter.of(message)[-1] if kit.adapter.of(message) else None
    if record is None or not hold.arrived.is_set():
        hold.release()
        why = f" (its turn {record.ending}: {record.error})" if record and record.error else ""
        raise ProbeFailed(f"the quick prompt was never answered{why}")
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
    patience = grace * 2 + kit.subject.policy.backend_stop_grace
    with trio.move_on_after(patience):
        await kit.adapter.wait_for(lambda: not record.running)
    if record.running:  # checked first: a turn still at work cannot settle
        raise ProbeFailed(f"the adapter ignored the stop and is still at work after {patience:g}s")
    await kit.until(lambda: kit.agent.rooms[kit.room_id].running is None, "the turn never settled")
    if kit.status(message) != "processing":
        raise ProbeFailed(f"a stopped turn's message became {kit.status(message)!r}")
    if record.ending != "cancelled":
        raise ProbeFailed(f"the adapter swallowed the cancellation: its turn {record.ending}")
    _asyncio_stopped(record.turn)
    return _passed("the cancel went through; the message stays processing")


def _asyncio_stopped(turn: Turn) -> None:
    """asyncio code (`run_asyncio`) that ignored its cancel, or shielded its work from
    it, past the stop grace: the trio side went on, the asyncio side did not stop."""
    for stop in turn.remote_stops:
        if stop.name == ASYNCIO_WORK and stop.outcome is StopOutcome.UNCONFIRMED:
            raise ProbeFailed(f"the asyncio code did not stop: {stop.detail}")


@_probe("nothing left after the agent stops", leaks=True)
async def nothing_left(kit: Kit) -> ProbeResult:
    """No task, client socket or child process outlives the agent (checked on exit)."""
    quick = kit.post(kit.subject.quick_prompt)
    await kit.until(lambda: kit.status(quick) in ("processed", "failed"), "no answer")
    message = kit.post(kit.subject.long_prompt)
    await kit.at_work(message)
    kit.signal("interrupt")
    await kit.until_status(message, "processed", "the message was not consumed")
    return _passed("no task, socket or child process left")


@_probe("history valid after an abort mid tool-calls")
async def history_after_tool_abort(kit: Kit) -> ProbeResult:
    """Interrupted while its tools run, the adapter's transcript stays valid: every tool
    call has exactly one result, right after the message that asked for it."""
    subject = kit.subject
    if subject.tool_prompt is None or subject.transcript is None:
        return _not_applicable(
            "no `tool_prompt` and `transcript` given (not a tool-calling adapter)"
        )
    message = kit.post(subject.tool_prompt)
    await kit.until(
        lambda: any("tool_call" in body for body in kit.event_bodies()),
        "no `tool_call` event was posted for the tool prompt",
    )
    kit.signal("interrupt", reason="conformance kit: not that tool")
    await kit.until_status(message, "processed", "the message was not consumed")
    after = kit.post(subject.quick_prompt)
    await kit.until(lambda: kit.status(after) in ("processed", "failed"), "no answer after")
    transcript = subject.transcript(kit.adapter.inner, kit.room_id)
    if problems := transcript_problems(transcript):
        raise ProbeFailed("; ".join(problems))
    calls = tool_calls(transcript)
    return _passed(f"{calls} tool call(s) in the transcript, each with one result")


@_probe("the reason of the last interrupt reaches the next turn")
async def reason_reaches_next_turn(kit: Kit) -> ProbeResult:
    """`Turn.last_abort` of the room's next turn carries the interrupt's kind and reason."""
    reason = "conformance kit: answer more briefly"
    message = kit.post(kit.subject.long_prompt)
    await kit.at_work(message)
    kit.signal("interrupt", reason=reason)
    await kit.until_status(message, "processed", "the message was not consumed")
    after = kit.post(kit.subject.quick_prompt)
    await kit.until(lambda: bool(kit.adapter.of(after)), "the next message never started")
    told = kit.adapter.of(after)[0].turn.last_abort
    if told is None or (told.kind, told.reason, told.message_id) != ("interrupt", reason, message):
        raise ProbeFailed(f"the next turn was told {told!r}")
    return _passed(f"the next turn was told: {told.kind}, {told.reason!r}")


def select_probes(names: Sequence[str]) -> list[Probe]:
    """The probes whose name contains one of `names` (case ignored), in kit order;
    `ValueError` naming the probes if one of `names` matches none."""
    chosen: list[Probe] = []
    for wanted in names:
        found = [p for p in PROBES if wanted.lower() in probe_name(p).lower()]
        if not found:
            known = "; ".join(probe_name(p) for p in PROBES)
            raise ValueError(f"no probe is named like {wanted!r} (the probes: {known})")
        chosen.extend(p for p in found if p not in chosen)
    return [p for p in PROBES if p in chosen]


async def run_probes(
    subject: Subject,
    probes: list[Probe] | None = None,
    *,
    progress: Callable[[ProbeResult], None] | None = None,
) -> list[ProbeResult]:
    """Run `probes` (every probe by default) against `subject`, one after another, each
    in a trio run of its own, bounded (`_bounded`): an adapter that never lets the
    cancel in fails its probes, each within its deadline, instead of hanging here. A
    subject that is not `isolated` runs them in this run, under its probe deadline."""
    results = []
    for probe in probes if probes is not None else PROBES:
        run = run_bounded if subject.isolated else run_here
        result = await run(probe_name(probe), probe, subject)
        results.append(result)
        if progress is not None:
            progress(result)
    return results
