"""What the browser tests of the console share: chromium, free ports, owned processes."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WAIT_MS = 15_000
"""Playwright's deadline for each thing the page must show."""

CHROMIUM_FLAGS = [
    "--no-sandbox",  # the tests run as root in CI
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # this machine's network is closed: no lookups
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    path = os.environ.get("BAND_TRIO_CHROMIUM") or shutil.which("chromium")
    if not path or not Path(path).is_file():
        pytest.fail(
            "the console's browser test needs chromium: `python3 dev.py test` installs "
            "Debian's package, or set BAND_TRIO_CHROMIUM to a chromium binary"
        )
    return path


class Processes:
    """The processes a test started, each stopped by its own PID at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *args: str, until: bytes | None = None) -> subprocess.Popen[bytes]:
        """Start `band-trio ARGS`; with `until`, return once a line of its output has it."""
        log = open(self.folder / f"{name}.err", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "band_trio", *args],
            stdout=subprocess.PIPE,
            stderr=log,
            cwd=self.folder,
            bufsize=0,  # unbuffered: `select` then tells the truth about each line
        )
        log.close()
        self.started.append(proc)
        if until is not None:
            assert proc.stdout is not None
            deadline = time.monotonic() + 30
            line = b""
            while until not in line:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([proc.stdout], [], [], max(left, 0))
                if not ready:
                    pytest.fail(f"{name} did not print {until!r} within 30 s")
                line = proc.stdout.readline()
                if not line:
                    err = (self.folder / f"{name}.err").read_text()
                    pytest.fail(f"{name} exited ({proc.wait()}) before {until!r}: {err}")
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> int:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            pytest.fail(f"pid {proc.pid} ignored SIGTERM for 20 s")

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
