#!/usr/bin/env python3
"""One entry point for working on band-trio from a fresh clone.

    python3 dev.py demo     set up .venv if needed, then run `band-trio demo`
    python3 dev.py test     set up .venv if needed, then lint, type-check and run the tests

Set-up creates `.venv` next to this file and installs the package with its test
extras; it is skipped while `pyproject.toml` is unchanged since the last install.
Only the standard library is used here, so it runs on any Python >= 3.11.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".band-trio-installed"


def _run(*cmd: str | os.PathLike[str]) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True)


def ensure_venv() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this file runs on any python3
        sys.exit("band-trio needs Python >= 3.11")
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if PY.exists() and STAMP.exists() and STAMP.read_text() == want:
        return
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    _run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(PY, "-m", "pip", "install", "--quiet", "-e", ".[test]")
    STAMP.write_text(want)


def cmd_demo(args: list[str]) -> None:
    _run(BIN / "band-trio", "demo", *args)


def cmd_test(args: list[str]) -> None:
    code = [p for p in ("src", "tests", "benchmarks", "dev.py") if (ROOT / p).exists()]
    _run(PY, "-m", "ruff", "check", *code)
    _run(PY, "-m", "ruff", "format", "--check", *code)
    _run(PY, "-m", "mypy")
    _run(BIN / "lint-imports")
    _run(PY, "-m", "pytest", *args)


COMMANDS = {"demo": cmd_demo, "test": cmd_test}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python3 dev.py {{{'|'.join(COMMANDS)}}} [args...]")
    ensure_venv()
    try:
        COMMANDS[sys.argv[1]](sys.argv[2:])
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)


if __name__ == "__main__":
    main()
