"""Settings the whole suite runs under (tests/conftest.py), checked where they apply."""

from __future__ import annotations

import signal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


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
