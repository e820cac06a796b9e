"""A progress bar on stderr while the benchmark runs (plain lines when not a terminal)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]

WIDTH = 30


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self._last_line = 0.0
        self.label = ""

    def step(self, label: str, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        self.label = label
        self._draw()

    def note(self, label: str) -> None:
        self.label = label
        self._draw(force=True)

    def _draw(self, *, force: bool = False) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.started
        filled = WIDTH * self.done // self.total
        bar = "#" * filled + "." * (WIDTH - filled)
        text = f"[{bar}] {self.done}/{self.total} {elapsed:5.0f}s {self.label}"
        if self.tty:
            self.stream.write("\r\x1b[2K" + text[:120])
        elif force or elapsed - self._last_line >= 5 or self.done == self.total:
            self.stream.write(text + "\n")
            self._last_line = elapsed
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
