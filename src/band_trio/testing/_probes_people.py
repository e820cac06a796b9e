"""The probes of what the room's people do while a turn runs: questions and guidance.

* An adapter that asks the room (`Turn.ask`) waits inside its turn: an interrupt
  or a stop must end that wait at its first hop, and the turn must unwind as for
  any other await (the message consumed, or left for the replay, which asks
  again). The kit knows an adapter asks from the port under its `Turn`
  (`_watched`) and from the room (the question's post); an adapter with no
  `Subject.ask_prompt`, or one that answers it without asking, is not applicable.
* In a room that steers (`WhileBusy.STEER`), every message offered to a running
  turn is either taken by it or runs afterwards as its own turn: none lost, none
  run twice; and a turn that takes guidance does something after taking it (a
  turn that takes what was offered after its last post, and returns, dropped it).
"""

from __future__ import annotations

import re
from collections import Counter

import trio

from ..policy import WhileBusy
from ._kit import Kit, ProbeFailed, ProbeResult
from ._observed import TurnRecord
from ._probes import _ms, _not_applicable, _passed, _probe
from ._watched import AskRecord

__all__ = ["ask_interrupted", "ask_stopped", "guidance_not_lost"]

_QUESTION = re.compile(r"Question q-[0-9a-f]{8}\b")
"""How the agent's question post starts (the wire format: `band_trio._question_format`)."""

GUIDANCE = 2
"""Messages the guidance probe offers to the running turn."""


@_probe("an interrupt ends the wait for an answer")
async def ask_interrupted(kit: Kit) -> ProbeResult:
    """Interrupted while it waits for the room's answer, the wait ends within the
    cleanup grace, the turn unwinds by the cancel and its message is consumed."""
    asking = await _asking(kit)
    if isinstance(asking, ProbeResult):
        return asking
    message, record, ask = asking
    sent = kit.signal("interrupt")
    took = await _wait_ended(kit, record, ask, sent, "interrupt")
    await kit.until_status(message, "processed", "the message was not consumed")
    return _passed(f"the wait ended {_ms(took)} after the interrupt; consumed", took)


@_probe("a stop ends the wait for an answer, play asks again")
async def ask_stopped(kit: Kit) -> ProbeResult:
    """Stopped while it waits for the room's answer, the wait ends within the cleanup
    grace and the turn unwinds; the message is left `processing`, and after play the
    replay asks again."""
    asking = await _asking(kit)
    if isinstance(asking, ProbeResult):
        return asking
    message, record, ask = asking
    sent = kit.signal("stop")
    took = await _wait_ended(kit, record, ask, sent, "stop")
    await kit.until(lambda: kit.agent.rooms[kit.room_id].running is None, "the turn never settled")
    if (status := kit.status(message)) != "processing":
        raise ProbeFailed(f"after stop the message is {status!r}, not 'processing'")
    kit.signal("play")

    def asked_again() -> bool:
        records = kit.adapter.of(message)
        return len(records) > 1 and (bool(records[1].watch.asks) or not records[1].running)

    await kit.until(asked_again, "not entered again after play")
    if not kit.adapter.of(message)[1].watch.asks:
        raise ProbeFailed(f"the replay {kit.adapter.of(message)[1].ending} without asking again")
    kit.signal("interrupt")  # end the replay's question: this probe is done with it
    await kit.until_status(message, "processed", "the replay was not consumed")
    return _passed(f"the wait ended {_ms(took)} after the stop; left processing; asked again", took)


async def _asking(kit: Kit) -> tuple[str, TurnRecord, AskRecord] | ProbeResult:
    """Post the ask prompt and wait until the adapter waits for the answer: its port was
    asked and the question is in the room. Not applicable when it never asks."""
    prompt = kit.subject.ask_prompt
    if prompt is None:
        return _not_applicable("no `ask_prompt` given (the adapter does not ask the room)")
    before = len(kit.said())
    message = kit.post(prompt)

    def asked_or_done() -> bool:
        records = kit.adapter.of(message)
        if not records:
            return False
        posted = any(_QUESTION.match(text) for text in kit.said()[before:])
        return (bool(records[-1].watch.asks) and posted) or not records[-1].running

    try:
        await kit.until(asked_or_done, "the adapter never asked the room for the ask prompt")
    except ProbeFailed:
        if not kit.adapter.of(message):
            raise
        kit.signal("interrupt")  # it works on without asking: end it, the probe is done
        return _not_applicable(
            f"the adapter did not ask the room within {kit.subject.deadline:g}s of the ask prompt"
        )
    record = kit.adapter.of(message)[-1]
    if not record.watch.asks:
        return _not_applicable(
            f"the adapter answered the ask prompt without asking ({record.ending})"
        )
    ask = record.watch.asks[-1]
    if ask.ended is not None:
        raise ProbeFailed(
            f"its wait for the answer ended ({ask.ending}) before the probe could signal: give "
            "an `ask_prompt` whose question waits for the room"
        )
    return message, record, ask


async def _wait_ended(
    kit: Kit, record: TurnRecord, ask: AskRecord, sent: float, mode: str
) -> float:
    """Wait (with the swallowed-cancel probe's patience) for the ask's wait and then the
    turn to end by the signal's cancel, each within the cleanup grace; how long after
    `sent` the wait ended."""
    policy = kit.subject.policy
    grace = policy.cleanup_grace
    patience = grace * 2 + policy.backend_stop_grace
    with trio.move_on_after(patience):
        await kit.adapter.wait_for(lambda: ask.ended is not None and not record.running)
    if ask.ended is None:
        raise ProbeFailed(
            f"the wait for the answer did not end within {patience:g}s of the {mode}: the "
            "adapter keeps the cancel out of `turn.ask` (a shielded scope?)"
        )
    took = ask.ended - sent
    if ask.ending != "cancelled":
        raise ProbeFailed(f"the wait for the answer ended {ask.ending}, not by the {mode}'s cancel")
    if took > grace:
        raise ProbeFailed(
            f"the wait for the answer ended {_ms(took)} after the {mode} (grace {grace:g}s)"
        )
    if record.running or record.ended is None:
        raise ProbeFailed(f"the turn was still at work {patience:g}s after the {mode}")
    if record.ending != "cancelled":
        raise ProbeFailed(
            f"the turn {record.ending} instead of letting the {mode}'s cancel through"
        )
    if (unwound := record.ended - sent) > grace:
        raise ProbeFailed(f"the adapter took {_ms(unwound)} to end its turn (grace {grace:g}s)")
    return took


@_probe("guidance is never lost", while_busy=WhileBusy.STEER)
async def guidance_not_lost(kit: Kit) -> ProbeResult:
    """In a room that steers, each message offered to the running turn is taken by it or
    runs afterwards as its own turn, exactly once; taken guidance is not dropped."""
    first = kit.post(kit.subject.steer_prompt)
    await kit.until(lambda: bool(kit.adapter.of(first)), "the adapter was never entered")
    offered = [
        kit.post(f"{kit.subject.quick_prompt} (guidance {n})") for n in range(1, 1 + GUIDANCE)
    ]
    everyone = [first, *offered]

    def settled() -> bool:
        if any(kit.status(m) not in ("processed", "failed") for m in everyone):
            return False
        return kit.agent.rooms[kit.room_id].running is None

    try:
        await kit.until(settled, "the turn and the messages offered to it did not all settle")
    except ProbeFailed as exc:
        statuses = ", ".join(f"guidance {n}: {kit.status(m)}" for n, m in enumerate(offered, 1))
        raise ProbeFailed(f"{exc} ({statuses})") from None
    taken = Counter(m.id for record in kit.adapter.turns for m in record.watch.taken)
    problems = []
    if kit.status(first) != "processed":  # what it took shared a failure, unseen
        problems.append(f"the turn for the steer prompt ended {kit.status(first)}, not processed")
    for n, message in enumerate(offered, 1):
        ran, took = len(kit.adapter.of(message)), taken[message]
        if ran + took == 0:
            problems.append(f"guidance {n} was neither taken nor run ({kit.status(message)})")
        elif ran + took > 1:
            problems.append(f"guidance {n} was taken {took} time(s) and run {ran} time(s)")
    for record in kit.adapter.turns:
        if record.ending != "returned":
            continue
        dropped = [t for t in record.watch.takes if t.posted == record.turn.posted]
        if dropped:
            count = sum(len(t.messages) for t in dropped)
            problems.append(
                f"the turn for {record.content!r} took {count} message(s) after its last post "
                "and returned: nothing came of them (dropped)"
            )
    if problems:
        raise ProbeFailed("; ".join(problems))
    took_all = sum(taken[m] for m in offered)
    return _passed(
        f"{took_all} taken by the running turn, {GUIDANCE - took_all} run as their own turns; "
        "none lost, none twice"
    )
