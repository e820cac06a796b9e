"""The retry rules (`band_trio.retry`, sans-IO) and the helper that drives them
(`contract.call_upstream`), without a network: attempts are scripted, time is trio's
autojump clock."""

from __future__ import annotations

import email.utils
import math
from collections.abc import Sequence
from typing import Any

import httpx2
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from band_trio import UpstreamError, UpstreamPolicy
from band_trio.contract import Message, Turn, TurnControl, UpstreamFault, call_upstream, fault_of
from band_trio.retry import (
    PLATFORM_RETRY_STATUSES,
    RETRY_STATUSES,
    Fault,
    FaultKind,
    GiveUp,
    Retries,
    Retry,
    full_jitter,
    retry_after,
    retry_after_seconds,
)
from seed_rotation import examples

# -- what is transient ------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_these_statuses_are_asked_again(status: int) -> None:
    assert Fault(FaultKind.STATUS, status=status).transient()


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 413, 422, 501])
def test_these_statuses_are_the_answer(status: int) -> None:
    assert not Fault(FaultKind.STATUS, status=status).transient()


def test_the_platform_treats_409_as_an_answer() -> None:
    assert 409 in RETRY_STATUSES and 409 not in PLATFORM_RETRY_STATUSES
    assert not Fault(FaultKind.STATUS, status=409).transient(PLATFORM_RETRY_STATUSES)


@pytest.mark.parametrize(
    ("kind", "transient"),
    [
        (FaultKind.UNSENT, True),
        (FaultKind.DROPPED, True),
        (FaultKind.STALLED, True),
        (FaultKind.TRUNCATED, True),
        (FaultKind.MALFORMED, False),
    ],
)
def test_broken_silent_and_cut_exchanges_are_transient_unreadable_ones_not(
    kind: FaultKind, transient: bool
) -> None:
    assert Fault(kind).transient() is transient


def test_httpx_errors_are_judged_by_what_they_mean() -> None:
    request = httpx2.Request("GET", "http://x/")
    assert fault_of(httpx2.ConnectError("no", request=request)).kind is FaultKind.UNSENT
    assert fault_of(httpx2.ReadTimeout("slow", request=request)).kind is FaultKind.STALLED
    assert fault_of(httpx2.RemoteProtocolError("cut", request=request)).kind is FaultKind.DROPPED
    assert fault_of(httpx2.ReadError("reset", request=request)).kind is FaultKind.DROPPED
    assert fault_of(httpx2.DecodingError("gzip", request=request)).kind is FaultKind.MALFORMED


# -- Retry-After -------------------------------------------------------------------------


def test_retry_after_reads_ms_seconds_and_dates_and_refuses_nonsense() -> None:
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "1.5"}) == 1.5
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after({"retry-after": date}, wall_now=now) == pytest.approx(30)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after({"retry-after": past}, wall_now=now) == 0
    for bad in ("soon", "-1", "nan", "", "Mon, 99 Foo 2024"):
        assert retry_after_seconds(bad) is None, bad
    assert retry_after_seconds("1e400") == math.inf  # asks for ever: past any cap
    assert retry_after({}) is None


# -- the backoff -------------------------------------------------------------------------


@given(attempt=st.integers(0, 10_000), unit=st.floats(0, 0.999999))
def test_full_jitter_stays_in_its_window(attempt: int, unit: float) -> None:
    wait = full_jitter(attempt, 0.5, 8.0, lambda: unit)
    assert 0 <= wait < min(8.0, 0.5 * 2 ** min(attempt, 64))


# -- the decision ------------------------------------------------------------------------


def ledger(**changes: Any) -> Retries:
    settings_ = {"attempts": 3, "base": 0.5, "cap": 8.0, "retry_after_cap": 60.0}
    return Retries(**{**settings_, **changes}, peer="the model provider", rand=lambda: 0.5)


def status_fault(status: int, after: float | None = None) -> Fault:
    return Fault(FaultKind.STATUS, status=status, retry_after=after)


def test_the_reasons_read_as_sentences() -> None:
    retries = ledger()
    assert retries.after(status_fault(429, 1)) == Retry(1)
    assert retries.after(status_fault(429, 1)) == Retry(1)
    assert retries.after(status_fault(429, 1)) == GiveUp(
        "the model provider answered 429 three times; last Retry-After 1 s"
    )
    mixed = ledger(attempts=2)
    mixed.after(status_fault(503))
    decision = mixed.after(Fault(FaultKind.DROPPED, detail="reset"))
    assert decision == GiveUp(
        "the model provider failed 2 attempts: answered 503, dropped the connection before"
        " the answer was complete (reset)"
    )
    assert ledger().after(Fault(FaultKind.STATUS, status=400, detail="bad")) == GiveUp(
        "the model provider answered 400: bad"
    )


def test_a_retry_after_past_the_cap_or_the_deadline_gives_up_at_once() -> None:
    assert ledger().after(status_fault(429, 120)) == GiveUp(
        "the model provider answered 429 with Retry-After 120 s, longer than the 60 s"
        " this agent waits"
    )
    decision = ledger().after(status_fault(503, 10), now=100, deadline=105)
    assert isinstance(decision, GiveUp) and "past the deadline (5 s left)" in decision.reason


def test_may_retry_false_gives_up_saying_why() -> None:
    decision = ledger().after(status_fault(503), may_retry=False, why_not="after a post")
    assert decision == GiveUp("the model provider answered 503 after a post")


FAULTS = st.one_of(
    st.builds(
        Fault,
        st.just(FaultKind.STATUS),
        status=st.sampled_from([400, 401, 404, 408, 409, 422, 429, 500, 503, 529]),
        retry_after=st.one_of(st.none(), st.floats(0, 200, allow_nan=False)),
    ),
    st.builds(Fault, st.sampled_from(list(FaultKind))),
)


@settings(max_examples=examples(300))
@given(
    faults=st.lists(FAULTS, min_size=1, max_size=8),
    attempts=st.integers(1, 5),
    deadline=st.floats(0.5, 1000),
)
def test_no_sequence_of_faults_breaks_the_rules(
    faults: Sequence[Fault], attempts: int, deadline: float
) -> None:
    """Whatever an upstream does: at most `attempts` attempts, never a retry after an
    answer status, never sooner than its Retry-After, never past the cap or the deadline."""
    retries = ledger(attempts=attempts)
    now, made = 0.0, 1
    for fault in faults:
        decision = retries.after(fault, now=now, deadline=deadline)
        if isinstance(decision, GiveUp):
            assert decision.reason.startswith("the model provider ")
            break
        assert fault.transient()
        if fault.retry_after is not None:
            assert decision.delay == fault.retry_after <= 60
        else:
            assert 0 <= decision.delay < 8
        assert now + decision.delay < deadline
        now += decision.delay
        made += 1
    assert made <= attempts


# -- the helper --------------------------------------------------------------------------


class Port:
    def __init__(self) -> None:
        self.posts: list[str] = []

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        self.posts.append(content)
        return "m"

    async def post_event(self, content: str, message_type: str, metadata: Any) -> str:
        self.posts.append(content)
        return "e"

    async def history(self) -> list[Message]:
        return []

    async def participants(self) -> list[Any]:
        return []


FAST = UpstreamPolicy(retry_base=1.0, retry_cap=4.0)


def a_turn(**upstream: Any) -> tuple[Turn, TurnControl]:
    message = Message(id="M", room_id="R", content="hi", sender_id="U", sender_type="User")
    control = TurnControl("R", "M", stop_grace=1.0, upstream=FAST.replace(**upstream))
    return Turn(message, Port(), control=control), control


def scripted(*outcomes: Exception | str) -> tuple[Any, list[float]]:
    """An attempt that raises or returns each outcome in turn; the times it was called."""
    queue, times = list(outcomes), []

    async def attempt() -> str:
        times.append(trio.current_time())
        outcome = queue.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return attempt, times


async def test_a_transient_fault_is_retried_after_retry_after(autojump_clock: object) -> None:
    turn, _ = a_turn()
    attempt, times = scripted(UpstreamFault.status(503, retry_after=7), "ok")
    assert await call_upstream(turn, attempt) == "ok"
    assert times[1] - times[0] == pytest.approx(7)


async def test_a_stall_is_a_fault_retried_and_named_by_the_read_timeout(
    autojump_clock: object,
) -> None:
    turn, _ = a_turn(attempts=2, read_timeout=30)
    stall = httpx2.ReadTimeout("timed out", request=httpx2.Request("GET", "http://x/"))
    attempt, times = scripted(stall, stall)
    with pytest.raises(UpstreamError, match="went silent past the read timeout twice") as caught:
        await call_upstream(turn, attempt, peer="the peer")
    assert len(times) == 2 and isinstance(caught.value.__cause__, httpx2.ReadTimeout)


async def test_a_post_during_the_attempt_makes_its_fault_final(autojump_clock: object) -> None:
    turn, _ = a_turn()

    async def attempt() -> str:
        await turn.send_event("half of it", message_type="thought")
        raise UpstreamFault.dropped("cut")

    with pytest.raises(UpstreamError, match="after part of the answer was posted"):
        await call_upstream(turn, attempt, peer="the peer")


async def test_posts_before_the_attempt_do_not_stop_its_retry(autojump_clock: object) -> None:
    turn, _ = a_turn()
    await turn.send_event("a tool ran", message_type="tool_call")  # an earlier round
    attempt, times = scripted(UpstreamFault.status(502), "ok")
    assert await call_upstream(turn, attempt) == "ok"
    assert len(times) == 2


async def test_an_aborted_turn_is_never_asked_again(autojump_clock: object) -> None:
    turn, control = a_turn()
    control.aborted("interrupt", "enough")
    attempt, times = scripted(UpstreamFault.status(503), "ok")
    with pytest.raises(UpstreamError, match="as the turn was being aborted"):
        await call_upstream(turn, attempt)
    assert len(times) == 1


async def test_may_retry_is_asked_before_each_retry(autojump_clock: object) -> None:
    turn, _ = a_turn()
    attempt, times = scripted(UpstreamFault.status(503), "ok")
    with pytest.raises(UpstreamError, match="after its work had started there"):
        await call_upstream(turn, attempt, may_retry=lambda: False)
    assert len(times) == 1


async def test_other_errors_pass_through_unretried(autojump_clock: object) -> None:
    turn, _ = a_turn()
    attempt, times = scripted(ValueError("a bug"), "ok")
    with pytest.raises(ValueError, match="a bug"):
        await call_upstream(turn, attempt)
    assert len(times) == 1


async def test_the_backoff_wait_is_cancelled_at_once(autojump_clock: object) -> None:
    turn, _ = a_turn()
    attempt, times = scripted(UpstreamFault.status(429, retry_after=50), "ok")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def interrupt() -> None:
                await trio.sleep(1)
                scope.cancel()

            nursery.start_soon(interrupt)
            await call_upstream(turn, attempt)
    assert scope.cancelled_caught and len(times) == 1
    assert trio.current_time() - times[0] == pytest.approx(1)  # not the 50 s wait


async def test_a_wait_past_the_deadline_in_force_gives_up_without_sleeping(
    autojump_clock: object,
) -> None:
    turn, _ = a_turn()
    attempt, times = scripted(UpstreamFault.status(503, retry_after=30), "ok")
    start = trio.current_time()
    with trio.move_on_after(10), pytest.raises(UpstreamError, match="past the deadline"):
        await call_upstream(turn, attempt)
    assert trio.current_time() == start and len(times) == 1


async def test_outside_a_turn_the_policy_given_decides(autojump_clock: object) -> None:
    attempt, times = scripted(*[UpstreamFault.status(503)] * 5)
    with pytest.raises(UpstreamError, match="answered 503 twice"):
        await call_upstream(None, attempt, upstream=FAST.replace(attempts=2))
    assert len(times) == 2
