"""The bounded chaos run (the long one is `benchmarks/chaos.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from band_trio.testing import run_chaos


@pytest.mark.long(18)
@pytest.mark.timeout(120)
@pytest.mark.seeds(11, 12, 13)
async def test_chaos_loses_nothing(tmp_path: Path, seed: int) -> None:
    with trio.fail_after(60):
        report = await run_chaos(seed=seed, steps=600, rooms=20, db=tmp_path / "chaos.db")
    assert report.ok, report.violations
    assert report.messages > 100
    assert sum(report.faults.values()) > 20  # it really was chaotic
    assert report.upgrades >= 3  # and the agent really reconnected, again and again
    assert report.connects >= report.restarts + 1  # after every restart of the platform
    assert report.outcomes["processed"] > 50  # real work got done (stopped rooms hold the rest)
