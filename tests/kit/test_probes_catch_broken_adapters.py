"""Every probe of the conformance kit fails on an adapter that breaks its rule, and
passes on a correct one.

The broken adapters are in `broken.py`, one per probe (and a second where a rule
can be broken two ways). Some rules cannot be broken by an adapter at all — the
runtime holds them whatever the adapter does: a stopped message left and replayed
on play, the next turn and `on_room_left` only after the aborted turn ended, the
reason told to the next turn — so for those the runtime itself is broken here
(monkeypatched, in that one test) to prove the probe can fail. Where an adapter
can break a rule in a way the probe, as written, cannot see, a
`test_blind_spot_...` shows the harm (on the remote stand-in, the platform or the
adapter itself) and asserts that the probe still passes: the day the probe learns
to see it, that test fails and is turned around.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import trio
from broken import (
    AsyncioAdapter,
    AsyncioShieldsWork,
    AsyncioSwallowsCancel,
    CorrectRemoteAdapter,
    DanglingToolCall,
    DetachedStop,
    DropsGuidance,
    KeepsWorking,
    LeavesChild,
    LeavesSocket,
    LeavesSystemTask,
    NeverStarted,
    PostsAfterCancel,
    Remote,
    RemoteLeftOpen,
    ShieldsAsk,
    ShortRemoteBlock,
    SlowCleanup,
    StaleOutbox,
    SwallowsAskCancel,
    SwallowsCancel,
    SwallowsLeave,
    ToolCaller,
    UnshieldedStart,
    transcript_of,
)

from band_trio.adapters import DemoAdapter
from band_trio.contract import Adapter
from band_trio.policy import Policy
from band_trio.runtime import _room
from band_trio.runtime._room import Room
from band_trio.runtime._turn import run_turn as real_run_turn
from band_trio.runtime._turn_state import AbortKind, ActiveTurn
from band_trio.testing import (
    PROBES,
    Probe,
    ProbeResult,
    Subject,
    ask_interrupted,
    ask_stopped,
    guidance_not_lost,
    history_after_tool_abort,
    interrupt_mid_work,
    leave_waits,
    next_turn_waits,
    nothing_after_finish,
    nothing_left,
    reason_reaches_next_turn,
    remote_stop_once,
    stop_before_handle,
    stop_then_play,
    swallowed_cancel,
)

DEADLINE = 15
TOOL_PROMPT = "use the tool sleep=30"
ASK_PROMPT = "ask may the kit go ahead?"

QUICK_STOP = Policy(cleanup_grace=0.3, backend_stop_grace=1.0, shutdown_grace=0.5)
"""A short cleanup grace, so a cleanup past it costs the test little time."""


def remote(*, stop_takes: float = 0.1) -> Remote:
    """A stand-in whose start is slow enough for a signal to land in it."""
    return Remote(start_takes=0.2, stop_takes=stop_takes)


def blind(result: ProbeResult) -> None:
    """The probe passed an adapter that breaks its rule (see the test's docstring)."""
    assert result.outcome == "passed", f"the probe sees it now: turn this test around ({result})"


def failed(result: ProbeResult, *words: str) -> None:
    assert result.outcome == "failed", result
    for word in words:
        assert word in result.observed, result


async def run(probe: Probe, subject: Subject) -> ProbeResult:
    with trio.fail_after(DEADLINE * 2):
        return await probe(subject)


async def until(remote: Remote, predicate: Callable[[], bool]) -> None:
    with trio.fail_after(DEADLINE):
        await remote.wait_for(predicate)


# -- every probe passes a correct adapter ---------------------------------------------


def correct_subject(probe: Probe, stand_in: Remote) -> Subject:
    if probe is history_after_tool_abort:
        return Subject(ToolCaller, tool_prompt=TOOL_PROMPT, transcript=transcript_of)
    if probe in (ask_interrupted, ask_stopped):  # the stand-in's adapter never asks
        return Subject(DemoAdapter, ask_prompt=ASK_PROMPT)
    return Subject(lambda: CorrectRemoteAdapter(stand_in))


@pytest.mark.parametrize("probe", PROBES, ids=lambda probe: probe.__name__)
async def test_a_correct_adapter_passes_the_probe(probe: Probe) -> None:
    stand_in = remote()
    result = await run(probe, correct_subject(probe, stand_in))
    assert result.outcome == "passed", result
    assert stand_in.running() == [], "a correct adapter leaves no job running"
    assert all(job.stops <= 1 for job in stand_in.jobs.values()), "a job stopped twice"


@pytest.mark.parametrize(
    ("probe", "why"),
    [
        pytest.param(probe, why, id=probe.__name__)
        for probe, why in [
            (remote_stop_once, "registered no remote work"),
            (stop_before_handle, "registered no remote work"),
            (nothing_after_finish, "registered no remote work"),
            (history_after_tool_abort, "not a tool-calling adapter"),
            (ask_interrupted, "no `ask_prompt` given"),
            (ask_stopped, "no `ask_prompt` given"),
        ]
    ],
)
async def test_the_probe_does_not_apply_to_an_adapter_without_remote_work(
    probe: Probe, why: str
) -> None:
    result = await run(probe, Subject(DemoAdapter))
    assert result.outcome == "not applicable", result
    assert why in result.observed
    assert result.passed


# -- interrupt mid-work ---------------------------------------------------------------


async def test_interrupt_mid_work_fails_an_adapter_that_posts_after_the_cancel() -> None:
    result = await run(interrupt_mid_work, Subject(PostsAfterCancel))
    failed(result, "posted after the interrupt", "/messages")


async def test_interrupt_mid_work_fails_a_cleanup_past_the_grace() -> None:
    subject = Subject(lambda: SlowCleanup(0.6), policy=QUICK_STOP)
    failed(await run(interrupt_mid_work, subject), "to end its turn (grace 0.3s)")


# -- stop mid-work, then play ---------------------------------------------------------


async def test_stop_then_play_fails_a_runtime_whose_play_does_not_catch_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Broken runtime: play lifts the suppression but never replays what stop left.

    An adapter cannot break this probe's rules: the runtime settles every aborted turn
    itself (even one whose adapter swallowed the cancel, or raised), and replays it on
    play. Nor does a runtime that consumed a stopped message fail the status check: the
    platform ignores marks while the room is stopped, so the message stays
    `processing` (such a runtime fails here only because the replay never comes)."""

    def play_without_catch_up(room: Room) -> None:
        room._stopped = False

    monkeypatch.setattr(Room, "play", play_without_catch_up)
    result = await run(stop_then_play, Subject(DemoAdapter, deadline=1.5))
    failed(result, "not entered again after play")


async def test_blind_spot_stop_then_play_passes_a_stopped_turn_answering_after_play() -> None:
    """The stopped turn's answer is posted after play, from the adapter's outbox. The
    probe checks only what the runtime holds (the message left `processing`, entered
    again); the platform refuses posts while stopped, so the stale answer can only
    come after play, mixed with the replay's own posts. To see it the probe would have
    to let the replay work (`at_work`) before interrupting it and then find no message
    posted between the stop and that interrupt (an adapter that posts a progress
    message at the start of every turn would fail it too)."""
    adapters: list[StaleOutbox] = []

    def factory() -> StaleOutbox:
        adapters.append(StaleOutbox())
        return adapters[-1]

    result = await run(stop_then_play, Subject(factory))
    assert adapters[0].delivered, "the stopped turn's answer was posted after play"
    blind(result)


# -- remote stop sent once per abort --------------------------------------------------


async def test_remote_stop_once_fails_work_left_out_of_its_remote_block() -> None:
    stand_in = remote()
    result = await run(remote_stop_once, Subject(lambda: ShortRemoteBlock(stand_in)))
    failed(result, "1 remote work(s) started, 0 stop(s) sent")
    assert [job.prompt for job in stand_in.running()] == ["sleep=30"], "the job runs on"


async def test_remote_stop_once_fails_work_whose_start_is_never_told() -> None:
    stand_in = remote()
    policy = Policy(cleanup_grace=1.0, backend_stop_grace=5.0, shutdown_grace=0.2)
    subject = Subject(lambda: NeverStarted(stand_in), policy=policy, deadline=1.5)
    result = await run(remote_stop_once, subject)
    failed(result, "the remote work registered by the turn never started")
    assert stand_in.running(), "the job runs on: nobody could stop it"


# -- stop before the remote handle exists ---------------------------------------------


async def test_stop_before_handle_fails_a_start_the_cancel_cuts_off() -> None:
    stand_in = remote()
    result = await run(stop_before_handle, Subject(lambda: UnshieldedStart(stand_in)))
    failed(result, "no stop was sent", "orphaned")
    assert stand_in.running(), "the job whose start was cut off runs on"


# -- a stop after the remote work finished sends nothing ------------------------------


async def test_nothing_after_finish_fails_remote_work_left_open_over_the_reply() -> None:
    stand_in = remote()
    result = await run(nothing_after_finish, Subject(lambda: RemoteLeftOpen(stand_in)))
    failed(result, "the remote work was still open when the adapter replied")


# -- the next turn waits for the previous stop ----------------------------------------


def overlap_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Break the runtime: a room moves on as soon as its turn is aborted, and the
    aborted turn ends on its own, in a task nobody waits for."""
    real_abort = ActiveTurn.abort
    aborted: dict[str, trio.Event] = {}
    errors: list[Exception] = []

    def abort(turn: ActiveTurn, kind: AbortKind, reason: str | None = None) -> bool:
        won = real_abort(turn, kind, reason)
        aborted.setdefault(turn.message.id, trio.Event()).set()
        return won

    async def run_turn(*args: object) -> bool:
        turn = args[2]
        assert isinstance(turn, ActiveTurn)
        moved = [False]
        ended = trio.Event()

        async def whole() -> None:
            try:
                moved[0] = await real_run_turn(*args)  # type: ignore[arg-type]
            except Exception as exc:  # e.g. settling after the agent closed its client
                errors.append(exc)
            finally:
                ended.set()

        trio.lowlevel.spawn_system_task(whole)
        async with trio.open_nursery() as nursery:
            for event in (ended, aborted.setdefault(turn.message.id, trio.Event())):
                nursery.start_soon(_cancel_when_set, event, nursery.cancel_scope)
        return moved[0]

    monkeypatch.setattr(ActiveTurn, "abort", abort)
    monkeypatch.setattr(_room, "run_one_turn", run_turn)


async def _cancel_when_set(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def test_next_turn_waits_fails_a_runtime_that_starts_the_next_turn_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Broken runtime; the adapter is correct but takes 0.3 s to clean up after the
    cancel. (An adapter cannot break this: the room runs one turn at a time and the
    turn ends only after the adapter's `on_turn` — its remote stops included — did.)"""
    subject = Subject(lambda: SlowCleanup(0.3))
    assert (await run(next_turn_waits, subject)).outcome == "passed"  # the real runtime
    overlap_turns(monkeypatch)
    result = await run(next_turn_waits, subject)
    failed(result, "the next turn started while the aborted one was still running")


async def test_blind_spot_next_turn_waits_passes_a_stop_left_to_a_system_task() -> None:
    """The stop returns at once and finishes 0.5 s later in a system task: the next
    turn starts while the remote job is still being stopped. The probe compares when
    the adapter's turn ended with when the next one began, and the turn did end first;
    the contract records the stop as done (`requested`, in 0 ms). To see it the kit
    needs a view the adapter cannot fake: the peer's (a `Subject` hook saying whether
    the remote is idle, checked at the next turn's entry), or the tasks and child
    processes alive at that entry that appeared during the aborted turn."""
    stand_in = remote(stop_takes=0.5)
    result = await run(next_turn_waits, Subject(lambda: DetachedStop(stand_in)))
    first, second = stand_in.jobs["job-1"], stand_in.jobs["job-2"]
    await until(stand_in, first.stopped.is_set)
    assert first.stopped_at is not None and first.stopped_at > second.started_at, "overlap"
    blind(result)


# -- leaving the room waits for the stop ----------------------------------------------


async def test_leave_waits_fails_an_adapter_that_swallows_the_leave() -> None:
    result = await run(leave_waits, Subject(SwallowsLeave))
    failed(result, "the turn returned instead of letting the cancel through")


async def test_leave_waits_fails_a_runtime_that_tells_the_adapter_too_early(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Broken runtime: `on_room_left` is called as the room is left, not after its turn
    ended. (An adapter cannot break the order: the room's task calls the hook only
    after its turn is over.)"""
    real_ending = Room.ending

    def ending(room: Room, kind: AbortKind, reason: str) -> None:
        real_ending(room, kind, reason)
        if kind is AbortKind.LEFT and room._nursery is not None:
            room._nursery.start_soon(room._ctx.adapter.on_room_left, room.id)

    monkeypatch.setattr(Room, "ending", ending)
    result = await run(leave_waits, Subject(lambda: SlowCleanup(0.3)))
    failed(result, "on_room_left ran while the turn was still running")


async def test_blind_spot_leave_waits_passes_a_stop_left_to_a_system_task() -> None:
    """As for the next turn: `on_room_left` runs while the job is still being stopped."""
    stand_in = remote(stop_takes=0.5)
    adapters: list[DetachedStop] = []

    def factory() -> DetachedStop:
        adapters.append(DetachedStop(stand_in))
        return adapters[-1]

    result = await run(leave_waits, Subject(factory))
    job = stand_in.jobs["job-1"]
    await until(stand_in, job.stopped.is_set)
    assert job.stopped_at is not None and adapters[0].left_at[0] < job.stopped_at, "overlap"
    blind(result)


# -- a swallowed cancellation is reported ---------------------------------------------


async def test_swallowed_cancel_fails_an_adapter_that_returns_on_cancel() -> None:
    result = await run(swallowed_cancel, Subject(SwallowsCancel))
    failed(result, "the adapter swallowed the cancellation: its turn returned")


async def test_swallowed_cancel_fails_an_adapter_that_keeps_working() -> None:
    """It ignores the stop for 1 s, past the probe's patience (2 x 0.2 s + 0.1 s)."""
    policy = Policy(cleanup_grace=0.2, backend_stop_grace=0.1, shutdown_grace=2.0)
    started = time.perf_counter()
    result = await run(swallowed_cancel, Subject(lambda: KeepsWorking(1.0), policy=policy))
    failed(result, "the adapter ignored the stop and is still at work after 0.5s")
    assert time.perf_counter() - started < DEADLINE


ASYNCIO_STOP = Policy(cleanup_grace=1.0, backend_stop_grace=0.3, shutdown_grace=2.0)
"""The asyncio task's stop grace well inside the cleanup grace: a probe fails it for what
the asyncio side did, not for the turn's length."""


@pytest.mark.parametrize("probe", [swallowed_cancel, interrupt_mid_work])
@pytest.mark.parametrize(
    ("factory", "words"),
    [
        (AsyncioSwallowsCancel, "the asyncio task ignored its cancel"),
        (AsyncioShieldsWork, "a task the asyncio task started still runs"),
    ],
    ids=["swallows", "shields"],
)
async def test_the_probes_fail_asyncio_code_that_does_not_stop(
    probe: Probe, factory: Callable[[], Adapter], words: str
) -> None:
    started = time.perf_counter()
    result = await run(probe, Subject(factory, policy=ASYNCIO_STOP))
    failed(result, "the asyncio code did not stop", words)
    assert time.perf_counter() - started < DEADLINE  # failed in bounded time, no hang


@pytest.mark.parametrize("probe", [swallowed_cancel, interrupt_mid_work])
async def test_the_probes_pass_asyncio_code_that_lets_the_cancel_through(probe: Probe) -> None:
    result = await run(probe, Subject(AsyncioAdapter, policy=ASYNCIO_STOP))
    assert result.outcome == "passed", result


# -- nothing left after the agent stops -----------------------------------------------


async def test_nothing_left_fails_an_adapter_that_leaves_a_socket_open() -> None:
    adapters: list[LeavesSocket] = []

    def factory() -> LeavesSocket:
        adapters.append(LeavesSocket())
        return adapters[-1]

    try:
        result = await run(nothing_left, Subject(factory))
    finally:
        for adapter in adapters:
            adapter.close()
    failed(result, "socket left open: 127.0.0.1:")


async def test_nothing_left_fails_an_adapter_that_leaves_a_child_running() -> None:
    adapters: list[LeavesChild] = []

    def factory() -> LeavesChild:
        adapters.append(LeavesChild())
        return adapters[-1]

    try:
        result = await run(nothing_left, Subject(factory))
    finally:
        for adapter in adapters:
            adapter.close()
    failed(result, "child process left running: pid", "(sleep 30)")


async def test_nothing_left_fails_an_adapter_that_leaves_a_system_task() -> None:
    """A system task has no owner that waits for it: the kit snapshots trio's system
    nursery before the agent starts and lists what is new and still running."""
    adapters: list[LeavesSystemTask] = []

    def factory() -> LeavesSystemTask:
        adapters.append(LeavesSystemTask())
        return adapters[-1]

    try:
        result = await run(nothing_left, Subject(factory))
        assert adapters[0].running == 2, "both turns' tasks outlived the agent"
    finally:
        for adapter in adapters:
            adapter.release()
    failed(result, "system task outlived the agent")


# -- history valid after an abort mid tool-calls --------------------------------------


async def test_history_after_tool_abort_fails_a_tool_call_left_without_result() -> None:
    subject = Subject(DanglingToolCall, tool_prompt=TOOL_PROMPT, transcript=transcript_of)
    failed(await run(history_after_tool_abort, subject), "tool call 'call-", ": 0 results")


# -- the reason of the last interrupt reaches the next turn ---------------------------


async def test_reason_reaches_next_turn_fails_a_runtime_that_drops_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Broken runtime: the next turn is told the interrupt without its reason. (An
    adapter cannot break this: `Turn.last_abort` is filled in by the runtime.)"""
    assert (await run(reason_reaches_next_turn, Subject(DemoAdapter))).outcome == "passed"
    real_note = AbortKind.note

    def note_without_reason(kind: AbortKind, reason: str | None, message_id: str) -> object:
        return real_note(kind, None, message_id)

    monkeypatch.setattr(AbortKind, "note", note_without_reason)
    result = await run(reason_reaches_next_turn, Subject(DemoAdapter))
    failed(result, "the next turn was told LastAbort(kind='interrupt', reason=None")


# -- questions: an interrupt or a stop ends the wait for an answer ---------------------


@pytest.mark.parametrize(("probe", "mode"), [(ask_interrupted, "interrupt"), (ask_stopped, "stop")])
async def test_the_question_probes_fail_a_shielded_wait_in_bounded_time(
    probe: Probe, mode: str
) -> None:
    """The shielded wait lasts until its `answer_within` (2 s), past the probe's patience
    (2 x 0.3 s + 1 s): the probe fails at its patience, and the kit's agent then stops
    once the question has timed out."""
    started = time.perf_counter()
    result = await run(
        probe, Subject(lambda: ShieldsAsk(2.0), ask_prompt=ASK_PROMPT, policy=QUICK_STOP)
    )
    failed(result, f"did not end within 1.6s of the {mode}", "shielded")
    assert time.perf_counter() - started < DEADLINE


@pytest.mark.parametrize(("probe", "mode"), [(ask_interrupted, "interrupt"), (ask_stopped, "stop")])
async def test_the_question_probes_fail_an_adapter_that_swallows_the_cancel_of_its_ask(
    probe: Probe, mode: str
) -> None:
    result = await run(probe, Subject(SwallowsAskCancel, ask_prompt=ASK_PROMPT))
    failed(result, f"the turn returned instead of letting the {mode}'s cancel through")


async def test_the_question_probes_do_not_apply_to_an_adapter_that_answers_without_asking() -> None:
    result = await run(ask_interrupted, Subject(DemoAdapter, ask_prompt="hello"))
    assert result.outcome == "not applicable", result
    assert "answered the ask prompt without asking" in result.observed


# -- guidance is never lost -----------------------------------------------------------


async def test_guidance_not_lost_fails_an_adapter_that_drops_what_it_takes() -> None:
    result = await run(guidance_not_lost, Subject(DropsGuidance))
    failed(result, "took 2 message(s) after its last post", "dropped")


async def test_guidance_not_lost_fails_a_runtime_that_loses_untaken_guidance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Broken runtime: a message offered to the running turn leaves the room's queue at
    once, taken or not. (An adapter cannot lose untaken guidance: it stays queued until
    taken.) The demo adapter takes it at the end; one that never takes it loses it."""
    from band_trio.runtime._guidance import Guidance

    real_offer = Guidance.offer

    def offer_and_drop(guidance: Guidance, item: object) -> None:
        real_offer(guidance, item)  # type: ignore[arg-type]
        guidance._queue.remove(item)  # type: ignore[arg-type]

    monkeypatch.setattr(Guidance, "offer", offer_and_drop)
    result = await run(guidance_not_lost, Subject(lambda: SlowCleanup(0.0), deadline=2))
    failed(result, "did not all settle")


# -- every probe is covered here ------------------------------------------------------

COVERED = {
    interrupt_mid_work,
    stop_then_play,
    remote_stop_once,
    stop_before_handle,
    nothing_after_finish,
    next_turn_waits,
    leave_waits,
    swallowed_cancel,
    nothing_left,
    history_after_tool_abort,
    reason_reaches_next_turn,
    ask_interrupted,
    ask_stopped,
    guidance_not_lost,
}


def test_every_probe_has_a_broken_adapter_here() -> None:
    """A probe added to the kit needs a test above that makes it fail."""
    missing = [probe.__name__ for probe in PROBES if probe not in COVERED]
    assert missing == [], f"probes with no broken adapter in this file: {missing}"
