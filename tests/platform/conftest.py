"""Fixtures: a REST client for the seeded agent (`platform` is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from band_trio.platform import Platform


@pytest.fixture
async def client(platform: Platform) -> AsyncIterator[httpx2.AsyncClient]:
    """REST client authenticated as the seeded agent."""
    key = platform.info.api_key
    assert key is not None
    headers = {"X-API-Key": key, "content-type": "application/json"}  # as band-trio's link sends
    async with httpx2.AsyncClient(base_url=platform.info.rest_url, headers=headers) as c:
        yield c
