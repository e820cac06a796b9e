"""`band-trio --version` and `--help` cost about an interpreter start: they import no
command's implementation (trio, httpx2, the runtime: ~0.3 s); each command imports
what it needs when it is the one run (docs/reference/cli.md).

The real `band-trio` entry point (`band_trio.cli.main`) in a process, which then
lists the modules it imported: the interpreter's own `-X importtime` does not see a
module loaded by `importlib.import_module`.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("trio", "httpx2", "msgspec", "band_trio.runtime", "band_trio.platform")
COMMAND_MODULES = ("_agent", "_bench", "_bridge", "_conformance", "_ctl", "_demo", "_host")
COMMAND_MODULES += ("_platform", "_runs_api")
LISTED = "--- modules ---"
SCRIPT = f"""
import sys
from band_trio.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert exc.code == 0, exc.code
print({LISTED!r}, *sys.modules, sep="\\n", file=sys.stderr)
"""


def imported(*args: str) -> set[str]:
    """The modules `band-trio ARGS` imports (its status must be 0)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(done.stderr.split(LISTED, 1)[1].split())


def heavy(modules: set[str]) -> list[str]:
    commands = {f"band_trio.cli.{name}" for name in COMMAND_MODULES}
    return sorted(
        m for m in modules if m in commands or any(m == h or m.startswith(h + ".") for h in HEAVY)
    )


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_command(args: list[str]) -> None:
    modules = imported(*args)
    assert "band_trio.cli" in modules  # the reading is real
    assert heavy(modules) == []


def test_a_command_imports_its_own_implementation_only() -> None:
    modules = imported("platform", "--help")
    assert "band_trio.cli._platform" in modules
    assert "band_trio.cli._agent" not in modules
    assert "band_trio.runtime" not in modules


def test_the_listed_summaries_are_the_commands_own() -> None:
    """`band-trio --help` lists `SUMMARIES` without importing the commands: each must
    be the words the command's module gives `add_parser`."""
    import argparse
    import importlib

    from band_trio.cli._parser import SUMMARIES

    for name, summary in SUMMARIES.items():
        module = importlib.import_module(f"band_trio.cli._{name.replace('-', '_')}")
        commands = argparse.ArgumentParser().add_subparsers()
        module.add_parser(commands)
        own = {action.dest: action.help for action in commands._choices_actions}
        assert own == {name: summary}
