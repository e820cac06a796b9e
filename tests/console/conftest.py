"""The console tests' fixtures: a platform serving the console and a client of it; the
processes a browser test starts, stopped at its end."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2
import pytest
from browser_support import Processes

from band_trio.platform import Platform, open_platform


@pytest.fixture
async def console() -> AsyncIterator[Platform]:
    async with open_platform(seed=True, console=True) as running:
        yield running


@pytest.fixture
async def http(console: Platform) -> AsyncIterator[httpx2.AsyncClient]:
    # a body the console takes says it is JSON (the page's fetch does)
    json_body = {"content-type": "application/json"}
    async with httpx2.AsyncClient(base_url=console.info.rest_url, headers=json_body) as client:
        yield client


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    running = Processes(tmp_path)
    try:
        yield running
    finally:
        running.close()
