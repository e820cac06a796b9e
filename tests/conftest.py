"""Shared fixtures: an embedded platform on loopback and a live-task baseline (the seeded
tests' rotation is the `seed_rotation` plugin beside this file)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator

import pytest
import trio

from band_trio.platform import Platform, open_platform

pytest_plugins = ["pytester", "seed_rotation"]


def pytest_configure(config: pytest.Config) -> None:
    """Give SIGINT back its default handler when the run was started with it ignored.

    A shell without job control starts a background command (`pytest ... &`, as some CI
    steps and `nohup` wrappers do) with SIGINT ignored, and an ignored signal stays
    ignored across exec: every child a test starts would inherit it, and the tests that
    send a real Ctrl-C to a child (tests/cli/test_base_exceptions.py, the conformance
    command's in tests/kit/test_bounded_probes.py) would wait out their deadline. A
    handled signal is reset to its default on exec, so the children get the SIGINT a
    terminal gives; under pytest-xdist each worker runs this too."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
async def platform() -> AsyncIterator[Platform]:
    """A seeded embedded platform on 127.0.0.1 (one agent, one user, one room)."""
    async with open_platform(seed=True) as running:
        yield running


def live_tasks() -> int:
    return trio.lowlevel.current_statistics().tasks_living
