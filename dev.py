#!/usr/bin/env python3
"""One entry point for working on band-trio from a fresh clone.

    python3 dev.py demo     set up .venv if needed, then run `band-trio demo`
    python3 dev.py test     set up .venv if needed, then lint, type-check and run the tests

Set-up creates `.venv` next to this file and installs the package into it: for
`demo` the package alone (its runtime dependencies: a few seconds), for `test` with its
`test` extra as well (linters, type checker, test peers). It is skipped while
`pyproject.toml` is unchanged since the last install and that install holds what the
command needs (a `test` install serves `demo` too; a `demo` install is topped up).
`test` also installs OpenCode (npm `opencode-ai`, a test peer) into `.tools/opencode`
and the GitHub Copilot CLI (npm `@github/copilot`) into `.tools/copilot`, and passes
their binaries to the tests as `BAND_TRIO_OPENCODE` and `BAND_TRIO_COPILOT`; that needs
npm (the registry only: both ship their native binary inside a platform package). It
installs Debian's `chromium` with apt-get when it is missing (the console's browser
test) and passes it as `BAND_TRIO_CHROMIUM`. pytest runs on three workers for two CPUs, eight at
most (pytest-xdist, in the `test` extra); arguments after `test` go to pytest
after that, so `python3 dev.py test -n 0` runs it in one process.
Only the standard library is used here, so it runs on any Python >= 3.11.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".band-trio-installed"
EXTRAS = {"demo": "", "test": "test"}
"""What each command needs installed: `demo` the runtime only, `test` the `test` extra."""
OPENCODE_VERSION = "1.18.33"
OPENCODE_DIR = ROOT / ".tools" / "opencode"
COPILOT_VERSION = "1.0.102"
COPILOT_DIR = ROOT / ".tools" / "copilot"
TEST_WORKERS_PER_CPU = 1.5
"""pytest-xdist workers for `test`, per CPU: the suite's tests wait on sockets, peers and
processes, so more workers than cores fill the waits (229 s of pytest on two workers,
162 s on four, on the 2-core machine it is measured on), but it is CPU-bound there, and
past a point the workers only contend: in alternating runs on that machine, three took
136 and 154 s of pytest and 197 and 227 s of CPU, four 144 and 158 s and 241 and 281 s
(README, "Quick start"). On a machine other work loads, fewer are safer: `-n 2`."""
TEST_WORKERS_MAX = 8
"""More would spend their start-up (a pytest and a band-trio import each) for little."""


def _run(*cmd: str | os.PathLike[str]) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True)


def _installed(want: str) -> str | None:
    """The extra the last install brought (`""`: the runtime only), if it was of this
    `pyproject.toml` (`want`, its hash). A stamp of one line is an older dev.py's, which
    always installed the `test` extra."""
    if not (PY.exists() and STAMP.exists()):
        return None
    digest, newline, extra = STAMP.read_text().partition("\n")
    if digest != want:
        return None
    return extra if newline else "test"


def ensure_venv(extra: str) -> None:
    """`.venv` with the package installed (editable), plus `extra` when it is not `""`."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this file runs on any python3
        sys.exit("band-trio needs Python >= 3.11")
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    have = _installed(want)
    if have is not None and (have == extra or have == "test"):
        return
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    if extra:
        # the test extra is installed with a current pip, as it always was; the
        # runtime alone needs nothing newer than the venv's own (the demo's first run)
        _run(PY, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    _run(PY, "-m", "pip", "install", "--quiet", "-e", f".[{extra}]" if extra else ".")
    STAMP.write_text(f"{want}\n{extra}")


def _opencode_candidates() -> list[Path]:
    """The OpenCode binaries npm put under `.tools/opencode`, best first.

    npm's install-scripts policy skips `opencode-ai`'s postinstall (which would pick
    and link one), but the optional dependency for this os/cpu, `opencode-<os>-<arch>`,
    ships the binary itself; `-baseline` (no AVX2) and `-musl` builds are the others."""
    system = {"linux": "linux", "darwin": "darwin", "win32": "windows"}.get(sys.platform, "")
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    musl = system == "linux" and platform.libc_ver()[0] != "glibc"
    exe = "opencode.exe" if system == "windows" else "opencode"
    names = [f"opencode-{system}-{arch}{suffix}" for suffix in ("", "-baseline")]
    names = [f"{name}-musl" for name in names] if musl else names
    found = [OPENCODE_DIR / "node_modules" / name / "bin" / exe for name in names]
    return [binary for binary in found if binary.is_file()]


def ensure_opencode() -> Path:
    """Install `opencode-ai@OPENCODE_VERSION` with npm into `.tools/opencode` once.

    The OpenCode adapter's tests need the real server, so a missing npm or a failed
    install ends `dev.py` with a message: they are never skipped for want of it. The
    stamp holds the version and the binary that answered `--version` with it (the
    AVX2 build dies on a CPU without AVX2; the baseline build is then used)."""
    stamp = OPENCODE_DIR / ".band-trio-installed"
    if stamp.is_file():
        version, _, chosen = stamp.read_text().partition("\n")
        if version == OPENCODE_VERSION and Path(chosen).is_file():
            return Path(chosen)
    npm = shutil.which("npm")
    if npm is None:
        sys.exit(f"dev.py: npm is needed to install opencode-ai@{OPENCODE_VERSION} (test peer)")
    stamp.unlink(missing_ok=True)
    spec = f"opencode-ai@{OPENCODE_VERSION}"
    try:
        OPENCODE_DIR.mkdir(parents=True, exist_ok=True)
        _run(npm, "install", "--no-audit", "--no-fund", "--prefix", OPENCODE_DIR, spec)
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"dev.py: installing {spec} into {OPENCODE_DIR} failed: {exc}")
    answers = []
    for binary in _opencode_candidates():
        said = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
        if said.stdout.strip() == OPENCODE_VERSION:
            stamp.write_text(f"{OPENCODE_VERSION}\n{binary}")
            return binary
        answers.append(f"{binary}: rc={said.returncode} {(said.stdout + said.stderr)[-200:]!r}")
    sys.exit(f"dev.py: {spec} installed, but no binary of it runs here: {answers or 'none found'}")


def ensure_copilot() -> Path:
    """Install `@github/copilot@COPILOT_VERSION` with npm into `.tools/copilot` once.

    The package itself is a small node loader; the native CLI is in the optional
    dependency for this os/cpu (`@github/copilot-linux-x64`, ...), installed from the
    npm registry with it: the loader is not needed, the binary runs as it is. The
    Copilot adapter's tests need it, so a missing npm or a failed install ends
    `dev.py` with a message. The stamp holds the version and the binary that answered
    `--version` with it."""
    stamp = COPILOT_DIR / ".band-trio-installed"
    if stamp.is_file():
        version, _, chosen = stamp.read_text().partition("\n")
        if version == COPILOT_VERSION and Path(chosen).is_file():
            return Path(chosen)
    npm = shutil.which("npm")
    if npm is None:
        sys.exit(f"dev.py: npm is needed to install @github/copilot@{COPILOT_VERSION} (test peer)")
    stamp.unlink(missing_ok=True)
    spec = f"@github/copilot@{COPILOT_VERSION}"
    try:
        COPILOT_DIR.mkdir(parents=True, exist_ok=True)
        _run(npm, "install", "--no-audit", "--no-fund", "--prefix", COPILOT_DIR, spec)
    except (OSError, subprocess.CalledProcessError) as exc:
        sys.exit(f"dev.py: installing {spec} into {COPILOT_DIR} failed: {exc}")
    system = {"linux": "linux", "darwin": "darwin", "win32": "win32"}.get(sys.platform, "")
    if system == "linux" and platform.libc_ver()[0] != "glibc":
        system = "linuxmusl"
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    exe = "copilot.exe" if system == "win32" else "copilot"
    binary = COPILOT_DIR / "node_modules" / "@github" / f"copilot-{system}-{arch}" / exe
    if not binary.is_file():
        sys.exit(f"dev.py: {spec} installed, but npm brought no binary for this platform: {binary}")
    said = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False)
    if f"CLI {COPILOT_VERSION}" not in said.stdout:
        sys.exit(f"dev.py: {binary} does not run here: rc={said.returncode} {said.stdout[-200:]!r}")
    stamp.write_text(f"{COPILOT_VERSION}\n{binary}")
    return binary


CHROMIUM_NAMES = ("chromium", "chromium-browser")


def _chromium() -> Path | None:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def ensure_chromium() -> Path:
    """Debian's `chromium`, for the console's browser test (Playwright drives it).

    Playwright's own browser download is not used: it comes from a CDN, not a
    package registry. When chromium is missing it is installed with apt-get (as
    root); anything else ends `dev.py` with a message: the test is never skipped."""
    found = _chromium()
    if found is not None:
        return found
    apt = shutil.which("apt-get")
    if apt is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        sys.exit(
            "dev.py: the console's browser test needs chromium; install it "
            "(Debian: `apt-get install chromium`, as root) and run this again"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in ([apt, "update", "-qq"], [apt, "install", "-y", "-qq", "chromium"]):
        print("+", " ".join(cmd), flush=True)
        done = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"dev.py: {' '.join(cmd)} failed: {(done.stdout + done.stderr)[-2000:]}")
    found = _chromium()
    if found is None:
        sys.exit("dev.py: apt-get installed chromium, but no chromium command is on PATH")
    return found


def cmd_demo(args: list[str]) -> None:
    _run(BIN / "band-trio", "demo", *args)


def cmd_test(args: list[str]) -> None:
    code = [p for p in ("src", "tests", "benchmarks", "dev.py") if (ROOT / p).exists()]
    _run(PY, "-m", "ruff", "check", *code)
    _run(PY, "-m", "ruff", "format", "--check", *code)
    _run(PY, "-m", "mypy")
    _run(BIN / "lint-imports")
    os.environ["BAND_TRIO_OPENCODE"] = str(ensure_opencode())
    os.environ["BAND_TRIO_COPILOT"] = str(ensure_copilot())
    os.environ["BAND_TRIO_CHROMIUM"] = str(ensure_chromium())
    # Bytecode is cached for the tests even where the environment says not to: without
    # it every pytest worker rewrites each test module's asserts again and every
    # band-trio process the tests start compiles the package from source (a quarter of
    # tests/cli's CPU on the 2-core machine). The caches go to the gitignored __pycache__.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if not args and not _asserts_rewritten():
        warm_up()
    _run(PY, "-m", "pytest", *pytest_args(args))


def _asserts_rewritten() -> bool:
    """Whether pytest has cached the test modules' rewritten bytecode here before."""
    return any((ROOT / "tests" / "__pycache__").glob("conftest.*-pytest-*.pyc"))


def warm_up() -> None:
    """Collect the tests once, in one process, before the workers start.

    In a fresh clone no test module's rewritten bytecode is cached, and every pytest
    worker rewrites the asserts of all of them at once: 7.5 s of CPU a worker instead of
    2.2 s, some 20 s of CPU on four workers where one collection costs 7.5 s. Only for
    the whole suite (no arguments): a run of one folder would pay for all the others.
    A failure here is the real run's to report, so it is not checked."""
    print("+ pytest --collect-only (caching the test modules' bytecode once)", flush=True)
    subprocess.run(
        [str(PY), "-m", "pytest", "--collect-only", "-qq"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


def pytest_args(args: list[str]) -> list[str]:
    """pytest's arguments for `test`: the workers first, so the caller's own come after
    and win (`-n 0`: one process). `worksteal` hands a worker that ran out of tests some
    of the other's, so a long test near the end does not leave one worker idle."""
    workers = max(1, min(TEST_WORKERS_MAX, int(TEST_WORKERS_PER_CPU * (os.cpu_count() or 1))))
    return ["-n", str(workers), "--dist", "worksteal", *args]


COMMANDS = {"demo": cmd_demo, "test": cmd_test}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python3 dev.py {{{'|'.join(COMMANDS)}}} [args...]")
    ensure_venv(EXTRAS[sys.argv[1]])
    try:
        COMMANDS[sys.argv[1]](sys.argv[2:])
    except subprocess.CalledProcessError as exc:
        sys.exit(exc.returncode)


if __name__ == "__main__":
    main()
