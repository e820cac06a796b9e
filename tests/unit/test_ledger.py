"""The per-room attempt ledger (sans-IO)."""

from __future__ import annotations

from band_trio.runtime._ledger import Ledger, Standing


def test_one_attempt_by_default_then_exhausted() -> None:
    ledger = Ledger(max_attempts=1, memory=10)
    assert ledger.standing("m") is Standing.RUNNABLE
    ledger.charge("m")
    assert ledger.standing("m") is Standing.EXHAUSTED


def test_refund_gives_back_exactly_one_attempt() -> None:
    ledger = Ledger(max_attempts=2, memory=10)
    ledger.charge("m")
    ledger.charge("m")
    ledger.refund("m")
    assert ledger.attempts("m") == 1  # decremented, not reset
    assert ledger.standing("m") is Standing.RUNNABLE


def test_ack_pending_then_completed() -> None:
    ledger = Ledger(max_attempts=1, memory=10)
    ledger.charge("m")
    ledger.ack_pending("m")
    assert ledger.standing("m") is Standing.ACK_PENDING
    ledger.complete("m")
    assert ledger.standing("m") is Standing.COMPLETED


def test_completed_memory_is_bounded() -> None:
    ledger = Ledger(max_attempts=1, memory=2)
    for name in ("a", "b", "c"):
        ledger.complete(name)
    assert ledger.standing("a") is Standing.RUNNABLE
    assert ledger.standing("c") is Standing.COMPLETED


def test_an_ack_pending_mark_remembers_whether_an_attempt_was_opened() -> None:
    ledger = Ledger(max_attempts=1, memory=4)
    ledger.ack_pending("m", claimed=False)  # its claim was refused: the mark must claim
    assert not ledger.pending_claimed("m")
    ledger.ack_pending("m")  # claimed since: never again
    assert ledger.pending_claimed("m")
    ledger.ack_pending("n", "boom", claimed=False)
    ledger.failed("n")
    assert ledger.pending_claimed("n")  # settled: nothing outstanding to claim for
