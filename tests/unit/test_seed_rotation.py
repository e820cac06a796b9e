"""The seeded tests' rotation (tests/seed_rotation.py) holds under `pytest -n` too: every
pytest-xdist worker collects the seed of the controller's day, not of its own clock."""

from __future__ import annotations

import datetime
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import seed_rotation


class Config(SimpleNamespace):
    """What the plugin's `pytest_configure` reads of a pytest config."""

    def addinivalue_line(self, name: str, line: str) -> None:
        pass

    def getoption(self, name: str) -> bool:
        assert name == "--all-seeds"
        return False


def configured(**attributes: Any) -> Any:
    """A config as `pytest_configure` leaves it (the budget it set given back after)."""
    config = Config(stash=pytest.Stash(), **attributes)
    seed_rotation.pytest_configure(config)  # type: ignore[arg-type]
    seed_rotation.pytest_unconfigure(config)  # type: ignore[arg-type]
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


BUDGETED = """
import pytest
from seed_rotation import examples

@pytest.mark.parametrize("budget", [examples(300), examples(12), examples(2)])
def test_budget(budget):
    pass
"""


def run_budgeted(pytester: pytest.Pytester, *args: str) -> list[str]:
    pytester.makepyfile(test_budgeted=BUDGETED)
    (pytester.path / "seed_rotation.py").write_text(Path(seed_rotation.__file__).read_text())
    result = pytester.runpytest_inprocess("-p", "seed_rotation", "--collect-only", "-q", *args)
    return [line.split("::")[1] for line in result.outlines if "::" in line]


def test_a_property_test_runs_a_third_of_its_examples_and_all_of_them_with_all_seeds(
    pytester: pytest.Pytester,
) -> None:
    """The examples follow the seeds' rule: a share a run (the seed rotated daily, in
    tests/conftest.py), every one before a release. Rounded up: never none."""
    assert run_budgeted(pytester) == ["test_budget[100]", "test_budget[4]", "test_budget[1]"]
    assert run_budgeted(pytester, "--all-seeds") == [
        "test_budget[300]",
        "test_budget[12]",
        "test_budget[2]",
    ]


def test_a_run_inside_this_run_leaves_its_budget_as_it_found_it(
    pytester: pytest.Pytester,
) -> None:
    """pytester's in-process runs share this process's plugin module: a property test
    defined after one (in a test body, as tests/unit/test_fuzz_frames.py's are) must
    still get this run's budget, not the inner run's."""
    before = seed_rotation.examples(300)
    run_budgeted(pytester)
    assert seed_rotation.examples(300) == before
    run_budgeted(pytester, "--all-seeds")
    assert seed_rotation.examples(300) == before


def test_every_property_test_s_count_is_the_run_s_budget() -> None:
    """A count written as a bare number would run in full every run, and the run's
    share would quietly stop being a third: each goes through `examples(...)` (a single
    draw, a count of 1, as `find` takes for one value, is no budget)."""
    bare = re.compile(r"max_examples\s*=(?!=)\s*(?!examples\(|1\b)")
    tests = Path(__file__).parents[1]
    found = [
        f"{path.relative_to(tests)}:{number}"
        for path in sorted(tests.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if bare.search(line)
    ]
    assert found == []
