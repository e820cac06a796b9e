"""A `band-trio platform --seed` process for a benchmark script: started, waited for
(its ready file), and ended by its PID however the script leaves."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

START_WITHIN = 20.0


@contextmanager
def platform_process(*flags: str) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, Any]]]:
    """The process and its ready info (URLs, the seeded ids and key); `flags` are added
    to `band-trio platform --seed`."""
    with tempfile.TemporaryDirectory() as folder:
        ready = Path(folder) / "ready.json"
        argv = [sys.executable, "-m", "band_trio", "platform", "--seed", *flags]
        proc = subprocess.Popen(
            [*argv, "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + START_WITHIN
            while not ready.exists():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the platform did not start")
                time.sleep(0.05)
            yield proc, json.loads(ready.read_text())
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
