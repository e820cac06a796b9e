"""The seeded tests' rotation (tests/seed_rotation.py) holds under `pytest -n` too: every
pytest-xdist worker collects the seed of the controller's day, not of its own clock."""

from __future__ import annotations

import datetime
from pathlib import Path
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


ROTATED = """
import pytest

@pytest.mark.rotated
@pytest.mark.parametrize("case", ["a", "b", "c"])
def test_case(case):
    pass

@pytest.mark.parametrize("case", ["x", "y"])
def test_every_case(case):
    pass
"""


def run_rotated(pytester: pytest.Pytester, *args: str) -> list[str]:
    pytester.makepyfile(test_rotated=ROTATED)
    (pytester.path / "seed_rotation.py").write_text(Path(seed_rotation.__file__).read_text())
    result = pytester.runpytest_inprocess("-p", "seed_rotation", "--collect-only", "-q", *args)
    return [line for line in result.outlines if "::" in line]


def test_a_rotated_test_runs_one_case_a_day_and_every_case_with_all_seeds(
    pytester: pytest.Pytester,
) -> None:
    chosen = "abc"[datetime.date.today().toordinal() % 3]
    assert run_rotated(pytester) == [
        f"test_rotated.py::test_case[{chosen}]",
        "test_rotated.py::test_every_case[x]",
        "test_rotated.py::test_every_case[y]",
    ]
    assert len(run_rotated(pytester, "--all-seeds")) == 5


def test_a_rotated_case_named_on_the_command_line_runs_whatever_the_day(
    pytester: pytest.Pytester,
) -> None:
    today = datetime.date.today().toordinal()
    others = sorted("abc"[(today + step) % 3] for step in (1, 2))  # the two not today's
    named = [f"test_rotated.py::test_case[{case}]" for case in others]
    assert run_rotated(pytester, *named) == named


def test_a_seed_that_is_not_a_number_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(
        test_seeded="""
import pytest

@pytest.mark.seeds(1, 2)
def test_seeded(seed):
    pass
"""
    )
    (pytester.path / "seed_rotation.py").write_text(Path(seed_rotation.__file__).read_text())
    monkeypatch.setenv("BAND_TRIO_SEED", "two")
    result = pytester.runpytest_inprocess("-p", "seed_rotation", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "BAND_TRIO_SEED='two': give a seed number" in "\n".join(result.errlines)
    assert "Traceback" not in "\n".join(result.errlines + result.outlines)
