"""dev.py installs what each command needs: the runtime for `demo`, the test extra for `test`.

`python3 dev.py demo` installed the whole test extra on a fresh clone (103 packages,
602 MB, 39 s here); the demo needs the package alone. The installs are recorded,
not run (`_run` and the venv builder are replaced: a unit test of the plan); the
demo itself running on the runtime alone is tests/cli/test_demo_runtime_only.py.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ModuleType, list[str]]]:
    """dev.py, its venv in `tmp_path`, its commands recorded instead of run, and an
    environment of its own: `cmd_test` names the tools' binaries in `os.environ`, and in
    the worker's own environment those stand-ins failed every later browser, OpenCode
    and Copilot test of the worker (the console's, at `-n 3`)."""
    real = os.environ
    before = _own(real)
    monkeypatch.setattr(os, "environ", dict(real))
    spec = importlib.util.spec_from_file_location("band_trio_dev_script", ROOT / "dev.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv = tmp_path / ".venv"
    monkeypatch.setattr(module, "ROOT", tmp_path)
    monkeypatch.setattr(module, "VENV", venv)
    monkeypatch.setattr(module, "PY", venv / "bin" / "python")
    monkeypatch.setattr(module, "STAMP", venv / ".band-trio-installed")
    ran: list[str] = []

    class Builder:
        def __init__(self, **_: object) -> None:
            pass

        def create(self, path: Path) -> None:
            (path / "bin").mkdir(parents=True)
            (path / "bin" / "python").touch()
            ran.append("venv")

    monkeypatch.setattr(module.venv, "EnvBuilder", Builder)
    monkeypatch.setattr(module, "_run", lambda *cmd: ran.append(" ".join(map(str, cmd[1:]))))
    yield module, ran
    assert _own(real) == before, "dev.py changed the test process's own environment"


def _own(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment but for the variable pytest itself sets at each phase."""
    return {k: v for k, v in environ.items() if k != "PYTEST_CURRENT_TEST"}


def test_demo_installs_the_runtime_only(dev: tuple[ModuleType, list[str]]) -> None:
    module, ran = dev
    module.ensure_venv(module.EXTRAS["demo"])
    assert ran == ["venv", "-m pip install --quiet -e ."]


def test_test_installs_the_test_extra_and_a_current_pip(dev: tuple[ModuleType, list[str]]) -> None:
    module, ran = dev
    module.ensure_venv(module.EXTRAS["test"])
    assert ran == [
        "venv",
        "-m pip install --quiet --upgrade pip",
        "-m pip install --quiet -e .[test]",
    ]


def test_a_demo_install_is_topped_up_for_test_and_a_test_one_serves_demo(
    dev: tuple[ModuleType, list[str]],
) -> None:
    module, ran = dev
    module.ensure_venv(module.EXTRAS["demo"])
    module.ensure_venv(module.EXTRAS["demo"])  # nothing to do
    assert ran == ["venv", "-m pip install --quiet -e ."]
    ran.clear()
    module.ensure_venv(module.EXTRAS["test"])
    assert ran == ["-m pip install --quiet --upgrade pip", "-m pip install --quiet -e .[test]"]
    ran.clear()
    module.ensure_venv(module.EXTRAS["demo"])
    module.ensure_venv(module.EXTRAS["test"])
    assert ran == []


def test_a_changed_pyproject_or_an_old_stamp(dev: tuple[ModuleType, list[str]]) -> None:
    module, ran = dev
    module.ensure_venv(module.EXTRAS["test"])
    ran.clear()
    digest = module.STAMP.read_text().partition("\n")[0]
    module.STAMP.write_text(digest)  # an older dev.py's stamp: it always installed the extra
    module.ensure_venv(module.EXTRAS["test"])
    assert ran == []
    (module.ROOT / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    module.ensure_venv(module.EXTRAS["demo"])
    assert ran == ["-m pip install --quiet -e ."]


def test_every_command_has_an_install(dev: tuple[ModuleType, list[str]]) -> None:
    module, _ = dev
    assert set(module.EXTRAS) == set(module.COMMANDS)
    assert sys.version_info >= (3, 11)


def test_the_tests_run_on_three_workers_for_two_cpus_and_the_caller_s_arguments_win(
    dev: tuple[ModuleType, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    module, _ = dev
    monkeypatch.setattr(module.os, "cpu_count", lambda: 2)
    assert module.pytest_args(["-x"]) == ["-n", "3", "--dist", "worksteal", "-x"]
    assert module.pytest_args(["-n", "0"])[-2:] == ["-n", "0"]  # argparse: the last wins
    monkeypatch.setattr(module.os, "cpu_count", lambda: 64)
    assert module.pytest_args([])[:2] == ["-n", "8"]
    monkeypatch.setattr(module.os, "cpu_count", lambda: None)
    assert module.pytest_args([])[:2] == ["-n", "1"]


def test_the_tests_run_with_bytecode_cached_whatever_the_environment_says(
    dev: tuple[ModuleType, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With PYTHONDONTWRITEBYTECODE set (as on this project's CI machines), every pytest
    worker rewrote each test module's asserts again and every band-trio process the tests
    start compiled the package from source: a quarter of tests/cli's CPU."""
    module, _ = dev
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    for tool in ("ensure_opencode", "ensure_copilot", "ensure_chromium"):
        monkeypatch.setattr(module, tool, lambda: tmp_path / "tool")
    seen: dict[str, str | None] = {}

    def run(*cmd: object) -> None:
        if cmd[1:3] == ("-m", "pytest"):
            seen["pytest"] = module.os.environ.get("PYTHONDONTWRITEBYTECODE")

    monkeypatch.setattr(module, "_run", run)
    monkeypatch.setattr(module, "warm_up", lambda: None)
    module.cmd_test([])
    assert seen == {"pytest": None}


def test_a_fresh_tree_collects_once_before_the_workers_start(
    dev: tuple[ModuleType, list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """In a fresh clone every worker rewrote every test module's asserts at once (7.5 s of
    CPU each, against 2.2 s once cached): one collection first caches them for all."""
    module, ran = dev
    for tool in ("ensure_opencode", "ensure_copilot", "ensure_chromium"):
        monkeypatch.setattr(module, tool, lambda: tmp_path / "tool")
    collected: list[list[str]] = []
    monkeypatch.setattr(module.subprocess, "run", lambda cmd, **_: collected.append(cmd[1:]))
    module.cmd_test([])
    assert collected == [["-m", "pytest", "--collect-only", "-qq"]]
    assert ran[-1].startswith("-m pytest -n ")  # then the workers
    cache = tmp_path / "tests" / "__pycache__"
    cache.mkdir(parents=True)
    (cache / "conftest.cpython-311-pytest-9.2.0.pyc").touch()
    module.cmd_test([])
    assert len(collected) == 1, "cached already: no second collection"
    (cache / "conftest.cpython-311-pytest-9.2.0.pyc").unlink()
    module.cmd_test(["tests/unit"])
    assert len(collected) == 1, "a run of one folder does not collect the rest"
