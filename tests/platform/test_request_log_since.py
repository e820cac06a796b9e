"""`RequestLog.since` is what benchmarks and `GET /_admin/log?since=` read: it must
give exactly the entries from `seq` on that the ring holds, from either end."""

from __future__ import annotations

import pytest

from band_trio.platform._log import Changes, RequestLog


@pytest.fixture
def ring() -> RequestLog:
    log = RequestLog(Changes(), entries=10)
    for i in range(25):
        log.append("note", float(i), body=str(i))
    return log


@pytest.mark.parametrize(
    ("seq", "first"),
    [(0, 15), (14, 15), (15, 15), (16, 16), (19, 19), (20, 20), (23, 23), (24, 24)],
)
def test_since_gives_every_held_entry_from_seq_on(ring: RequestLog, seq: int, first: int) -> None:
    assert [e.seq for e in ring.since(seq)] == list(range(first, 25))
    assert [e.body for e in ring.since(seq)] == [str(i) for i in range(first, 25)]


@pytest.mark.parametrize("seq", [25, 26, 1000])
def test_since_past_the_end_is_empty(ring: RequestLog, seq: int) -> None:
    assert ring.since(seq) == []


def test_since_on_an_empty_log_is_empty() -> None:
    assert RequestLog(Changes(), entries=10).since(0) == []
