"""The tutorials' and how-tos' code blocks, run as a reader runs them (tests/docs/_docrun.py).

Each page runs in a folder of its own, with `.venv` there standing for the
environment these tests run in (the reader's `.venv`), `PATH` starting with its
`bin`, and none of the caller's `BAND_*` settings: real `bash` shells, real
processes on 127.0.0.1, each shell's process group ended by its id. The adapter
tutorial runs in a copy of the repository instead, in its folder, with a `.venv` of
band-trio and its `pytest` extra only (tests/docs/_venv.py), as a reader of it in a
clone has: a stricter reader than the test environment's, so it runs once, there
(twice, it cost the suite some 20 s of a worker).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import trio

from ._docrun import parse, run_page
from ._venv import copy_of_repository, extra_venv

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
PAGES = [
    pytest.param("tutorial/getting-started.md", marks=pytest.mark.long(30)),
    pytest.param("tutorial/bring-an-existing-agent.md", marks=pytest.mark.long(15)),
    "how-to/runs-api.md",
    "how-to/observe.md",
    "how-to/console.md",
    "how-to/ask-the-room.md",
]
PAGE_DEADLINE = 150
TUTORIALS = sorted((DOCS / "tutorial").glob("*.md"))
"""Followed in one folder, a clone's (both use its `.venv`)."""


def reader_env(workdir: Path, venv: Path = Path(sys.prefix)) -> dict[str, str]:
    """A reader's shell: `venv`'s `bin` first (this environment's unless told), no BAND_*
    or pytest settings; `workdir/.venv` is `venv`."""
    venv_bin = venv / "bin"
    assert (venv_bin / "band-trio").exists(), (
        f"the pages' `.venv/bin/band-trio` stands for {venv_bin}/band-trio, which is missing:"
        " run the tests from band-trio's venv (`python3 dev.py test`)"
    )
    for tool in ("bash", "curl"):
        assert shutil.which(tool), f"the pages' commands need {tool} on PATH"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("BAND_", "PYTEST_", "VIRTUAL_ENV"))
    }
    env["PATH"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(workdir)  # nothing of the caller's dotfiles
    (workdir / ".venv").symlink_to(venv, target_is_directory=True)
    return env


@pytest.mark.timeout(PAGE_DEADLINE + 30)
@pytest.mark.parametrize("name", PAGES)
async def test_the_page_runs_as_written(name: str, tmp_path: Path) -> None:
    page = parse(DOCS / name)
    env = reader_env(tmp_path)
    with trio.fail_after(PAGE_DEADLINE):
        await run_page(page, tmp_path, ROOT, env)


@pytest.mark.long(30)
@pytest.mark.timeout(PAGE_DEADLINE + 30)
async def test_the_adapter_tutorial_runs_in_a_clone_with_only_the_pytest_extra(
    tmp_path: Path,
) -> None:
    """The tutorial followed in a clone of band-trio, in the clone's folder, with its
    `.venv` holding band-trio and the `pytest` extra only (not the test extra): the
    clone's own pytest configuration applies to the reader's test, and must not need a
    plugin only the test extra installs (pytest-timeout, for its `timeout` option)."""
    clone = copy_of_repository(ROOT, tmp_path / "band-trio")
    venv = tmp_path / "venv"
    extra_venv(venv, clone, {"pytest"})
    page = parse(DOCS / "tutorial/writing-an-adapter.md")
    env = reader_env(clone, venv)
    env["HOME"] = str(tmp_path)
    env.pop("PYTHONPATH", None)  # the clone's own `src`, as its editable install says
    with trio.fail_after(PAGE_DEADLINE):
        await run_page(page, clone, clone, env)


def test_the_tutorials_files_are_named_alike_and_apart() -> None:
    """The tutorials create their files in one folder: no file is created by two of
    them, no two names differ only in `_`, `-` or case (`my_adapter.py` and
    `myadapter.py`), and each `NAME.py` a tutorial names is one a tutorial creates, or
    one of the repository's."""
    created: dict[str, str] = {}
    for path in TUTORIALS:
        for step in parse(path).steps:
            if "file" in step.options:
                name = step.options["file"]
                assert created.setdefault(name, path.name) == path.name, (
                    f"{name} is created by {created[name]} and {path.name}"
                )
    alike: dict[str, str] = {}
    for name in created:
        key = re.sub(r"[-_]", "", name).lower()
        assert alike.setdefault(key, name) == name, f"{alike[key]} and {name}, in one folder"
    for path in TUTORIALS:
        for name in set(re.findall(r"[\w./-]+\.py\b", path.read_text())):
            assert name in created or (ROOT / name).exists(), (
                f"{path.name} names {name}, which no tutorial creates"
            )
