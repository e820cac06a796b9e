"""Shared fixtures: an embedded platform on loopback and a live-task baseline (the seeded
tests' rotation is the `seed_rotation` plugin beside this file)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from band_trio.platform import Platform, open_platform

pytest_plugins = ["pytester", "seed_rotation"]


@pytest.fixture
async def platform() -> AsyncIterator[Platform]:
    """A seeded embedded platform on 127.0.0.1 (one agent, one user, one room)."""
    async with open_platform(seed=True) as running:
        yield running


def live_tasks() -> int:
    return trio.lowlevel.current_statistics().tasks_living
