"""Shared fixtures: an embedded platform on loopback and a live-task baseline."""

from __future__ import annotations

import datetime
import os
from collections.abc import AsyncIterator

import pytest
import trio

from band_trio.platform import Platform, open_platform

pytest_plugins = ["pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-seeds",
        action="store_true",
        help="run a seeded test (@pytest.mark.seeds) with every one of its seeds; by default"
        " it runs one, rotated daily (BAND_TRIO_SEED=N runs N instead)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "seeds(*seeds): the seeds of a randomized test taking a `seed` argument"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One seed per run of the long randomized tests, rotated, so the inner loop stays fast
    and successive days still cover every seed; `--all-seeds` before a release runs them
    all. The seed is in the test's id (`[2]`): `BAND_TRIO_SEED=2` runs that one again."""
    marker = metafunc.definition.get_closest_marker("seeds")
    if marker is None:
        return
    every = [int(seed) for seed in marker.args]
    if metafunc.config.getoption("--all-seeds"):
        chosen = every
    elif os.environ.get("BAND_TRIO_SEED"):
        chosen = [int(os.environ["BAND_TRIO_SEED"])]
    else:
        chosen = [every[datetime.date.today().toordinal() % len(every)]]
    metafunc.parametrize("seed", chosen)


@pytest.fixture
async def platform() -> AsyncIterator[Platform]:
    """A seeded embedded platform on 127.0.0.1 (one agent, one user, one room)."""
    async with open_platform(seed=True) as running:
        yield running


def live_tasks() -> int:
    return trio.lowlevel.current_statistics().tasks_living
