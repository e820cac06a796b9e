"""One seed per run of the long randomized tests (`@pytest.mark.seeds(...)`), one case
per run of a test whose cases repeat, as real processes, what in-process tests hold for
each (`@pytest.mark.rotated`), rotated daily, and a third of each property test's
examples (`examples(n)`; tests/conftest.py gives hypothesis the day as its seed).

A plugin of its own (tests/conftest.py loads it) that imports nothing of band-trio, so
tests/unit/test_seed_rotation.py runs it in a pytester subprocess, with workers, cheaply.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Any

import pytest

SEED_DAY_KEY = pytest.StashKey[int]()
SEED_DAY = "band_trio_seed_day"
"""The day the seeds rotate by, fixed once per run: under `pytest -n` (pytest-xdist) the
controller hands its own to each worker, so that every worker collects the same seed
(a run across midnight would otherwise collect two different test sets, which xdist
refuses)."""

EXAMPLES_SHARE = 3
"""A run's share of a property test's examples: one in this many by default, every one
with `--all-seeds`. Hypothesis's seed is the seed day's (tests/conftest.py), so each
day's run draws other examples and the days between two releases cover what a run of
the full counts would."""


@dataclass
class Budget:
    share: int = 1
    """Outside a configured run (the module imported by hand): every example."""


BUDGET = Budget()
BUDGET_BEFORE_KEY = pytest.StashKey[int]()


def examples(full: int) -> int:
    """The run's `max_examples` of a property test whose full count is `full`: the full
    count with `--all-seeds`, else its share (rounded up, at least one). Called when a
    test module is imported, which is after `pytest_configure`."""
    return max(1, -(-full // BUDGET.share))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-seeds",
        action="store_true",
        help="run a seeded test (@pytest.mark.seeds) with every one of its seeds, a rotated"
        " test (@pytest.mark.rotated) with every one of its cases and a property test with"
        " all its examples; by default each runs one (a property test a third of its"
        " examples), rotated daily (BAND_TRIO_SEED=N runs seed N instead)",
    )


@pytest.hookimpl(tryfirst=True)  # tests/conftest.py's reads the day and the budget
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "seeds(*seeds): the seeds of a randomized test taking a `seed` argument"
    )
    config.addinivalue_line(
        "markers",
        "rotated: a parametrized test that runs one of its cases a run, rotated daily"
        " (every case with --all-seeds)",
    )
    named = os.environ.get("BAND_TRIO_SEED")
    if named and not named.strip().isdigit():  # a usage error, not a collection traceback
        raise pytest.UsageError(f"BAND_TRIO_SEED={named!r}: give a seed number, e.g. 2")
    handed: dict[str, object] = getattr(config, "workerinput", {})
    config.stash[SEED_DAY_KEY] = int(str(handed.get(SEED_DAY, datetime.date.today().toordinal())))
    config.stash[BUDGET_BEFORE_KEY] = BUDGET.share
    BUDGET.share = 1 if config.getoption("--all-seeds") else EXAMPLES_SHARE


def pytest_unconfigure(config: pytest.Config) -> None:
    """The budget back as it was: a run inside a run (pytester's in-process runs, in
    tests/unit/test_seed_rotation.py) must leave the outer run's budget as it found it."""
    if BUDGET_BEFORE_KEY in config.stash:
        BUDGET.share = config.stash[BUDGET_BEFORE_KEY]


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's hook (the controller, for each worker it starts): the seed day."""
    node.workerinput[SEED_DAY] = node.config.stash[SEED_DAY_KEY]


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
        chosen = [int(os.environ["BAND_TRIO_SEED"])]  # checked in pytest_configure
    else:
        chosen = [every[metafunc.config.stash[SEED_DAY_KEY] % len(every)]]
    metafunc.parametrize("seed", chosen)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Of each `@pytest.mark.rotated` test's cases, the day's one only (the others are
    deselected, so the summary says so). For cases each a real process repeating what an
    in-process test already holds for every case: the process path of each is still
    run, one a day, and every one of them with `--all-seeds`."""
    if config.getoption("--all-seeds"):
        return
    named = [arg.replace("\\", "/") for arg in config.args if "[" in arg]  # a case asked for
    cases: dict[tuple[str, str], list[pytest.Item]] = {}
    for item in items:
        if not isinstance(item, pytest.Function) or not item.get_closest_marker("rotated"):
            continue
        if any(arg.endswith(item.nodeid) for arg in named):
            continue  # named on the command line: run, whatever the day
        cases.setdefault((item.path.as_posix(), item.originalname), []).append(item)
    day = config.stash[SEED_DAY_KEY]
    dropped = {id(case) for group in cases.values() for case in group}
    for group in cases.values():
        dropped.discard(id(group[day % len(group)]))
    if dropped:
        config.hook.pytest_deselected(items=[item for item in items if id(item) in dropped])
        items[:] = [item for item in items if id(item) not in dropped]
