"""Fixtures of the bridge tests (the platform fixture comes from tests/conftest.py)."""

from __future__ import annotations

from band_trio.platform import Platform


def seeded(platform: Platform) -> tuple[str, str, str]:
    """The seeded agent's, room's and user's ids."""
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    return info.agent_id, info.room_id, info.user_id
