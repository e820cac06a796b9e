"""Settings the whole suite runs under (tests/conftest.py), checked where they apply."""

from __future__ import annotations

import signal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seed_rotation import SEED_DAY_KEY, examples


def test_hypothesis_sets_no_deadline_nor_a_speed_health_check() -> None:
    """A property test asserts behaviour, not speed: hypothesis's default 200 ms an
    example (and its too-slow health check) fail a test on a machine loaded to 10,
    as a "Flaky" or "DeadlineExceeded" the code under test did not cause."""
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


@given(st.integers())
def test_a_plain_given_test_inherits_it(n: int) -> None:
    assert settings.default.deadline is None


def test_sigint_has_a_handler_so_children_get_the_default() -> None:
    """A run started with SIGINT ignored (a background job without job control) would
    pass the ignore on to every child a test starts; a real Ctrl-C would not reach them."""
    assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN


def test_a_property_test_without_its_own_count_runs_the_run_s_share(
    request: pytest.FixtureRequest,
) -> None:
    """Hypothesis's 100 examples a test, a third of them without `--all-seeds`
    (tests/seed_rotation.py's budget, which tests/unit/test_seed_rotation.py holds)."""
    every = request.config.getoption("--all-seeds")
    assert settings.default.max_examples == (100 if every else 34)


def test_hypothesis_draws_from_the_seed_day_s_seed(request: pytest.FixtureRequest) -> None:
    """One seed for the run, the seed day's (each day's share of the examples is
    another), unless the command line names one: the same property draws the same
    examples twice, which a seed drawn per test (hypothesis's default) would not."""
    named = any(a.startswith("--hypothesis-seed") for a in request.config.invocation_params.args)
    assert named or request.config.option.hypothesis_seed == str(request.config.stash[SEED_DAY_KEY])
    drawn: list[int] = []

    @settings(max_examples=examples(30), database=None)
    @given(st.integers())
    def draw(n: int) -> None:
        drawn.append(n)

    draw()
    first = drawn[:]
    drawn.clear()
    draw()
    assert drawn == first
    assert len(set(first)) > 1  # a real sample, not one value again and again
