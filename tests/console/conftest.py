"""The console tests' fixtures: the processes a browser test starts, stopped at its end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import Processes


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    running = Processes(tmp_path)
    try:
        yield running
    finally:
        running.close()
