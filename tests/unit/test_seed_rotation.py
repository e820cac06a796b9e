"""The seeded tests' rotation (tests/seed_rotation.py) holds under `pytest -n` too: every
pytest-xdist worker collects the seed of the controller's day, not of its own clock."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

import pytest

import seed_rotation


class Config(SimpleNamespace):
    """What the plugin's `pytest_configure` reads of a pytest config."""

    def addinivalue_line(self, name: str, line: str) -> None:
        pass


def configured(**attributes: Any) -> Any:
    config = Config(stash=pytest.Stash(), **attributes)
    seed_rotation.pytest_configure(config)  # type: ignore[arg-type]
    return config


def test_the_controller_rotates_by_today() -> None:
    config = configured()
    assert config.stash[seed_rotation.SEED_DAY_KEY] == datetime.date.today().toordinal()


def test_each_worker_is_handed_the_controller_s_day_and_rotates_by_it() -> None:
    controller = configured()
    controller.stash[seed_rotation.SEED_DAY_KEY] = 7  # a run that began on another day
    node = SimpleNamespace(config=controller, workerinput={"workerid": "gw0"})
    seed_rotation.pytest_configure_node(node)
    worker = configured(workerinput=node.workerinput)
    assert worker.stash[seed_rotation.SEED_DAY_KEY] == 7
