"""What the agent routes read from a request before they act: membership, query numbers.

Shared by `_api` (every agent route) and `_listing` (the paginated message routes).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..server import HttpError
from ._platform import Platform
from ._store import Agent

__all__ = ["int_param", "member"]


def member(p: Platform, agent: Agent, room_id: str) -> None:
    """404 unless `agent` is in the room: a room it is not in looks like no room."""
    if not p.store.is_participant(room_id, agent.id):
        raise HttpError(404, "not_found", f"chat room {room_id} not found")


def int_param(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """An integer query parameter clamped to [low, high]: 400 when it is not an integer."""
    raw = query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HttpError(400, "bad_request", f"{name} must be an integer") from None
    return min(max(value, low), high)
