"""`GET /health`: each identity's state; 200 only when every identity is connected.

    {"healthy": true, "identities": [{"name": "support", "agent_id": "A",
      "connected": true, "rooms": 3, "forwards_in_flight": 1, "delivered": 10,
      "failed": 0, "cancelled": 1, "dropped": 2, "remote_stops": {...},
      "threads": {"limit": 16, "running": 0, "abandoned": 0, "abandoned_running": 0},
      "last_disconnect_reason": null, "ended": null}],
     "connects": {"limit": 32, "connecting": 0, "waiting": 0}}

An identity that ended (a terminal disconnect) stays listed, not connected,
with its reason, so the endpoint answers 503 and says why.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ..server import Receive, Scope, Send, answer
from ._identity import IdentityStatus

__all__ = ["ConnectStats", "HealthApp", "health_body"]


@dataclasses.dataclass(frozen=True, slots=True)
class ConnectStats:
    """The bridge's connect limiter (`BridgePolicy.max_connects`) as `/health` shows it."""

    limit: int
    connecting: int
    """Connection attempts in their set-up now (each holds a slot)."""
    waiting: int
    """Attempts waiting for a slot."""


def health_body(
    statuses: Sequence[IdentityStatus], connects: ConnectStats | None = None
) -> tuple[int, bytes]:
    """The status code and JSON body for these identities (and the connect limiter)."""
    healthy = bool(statuses) and all(s.connected for s in statuses)
    body: dict[str, Any] = {
        "healthy": healthy,
        "identities": [dataclasses.asdict(s) for s in statuses],
    }
    if connects is not None:
        body["connects"] = dataclasses.asdict(connects)
    return (200 if healthy else 503), msgspec.json.encode(body)


class HealthApp:
    """The ASGI app; `statuses` (and `connects`) are read on every request."""

    def __init__(
        self,
        statuses: Callable[[], Sequence[IdentityStatus]],
        connects: Callable[[], ConnectStats] | None = None,
    ) -> None:
        self._statuses = statuses
        self._connects = connects

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/health":
            await answer(send, 404, b'{"error":"not found"}')
        elif scope["method"] != "GET":
            await answer(send, 405, b'{"error":"method not allowed"}')
        else:
            connects = self._connects() if self._connects is not None else None
            await answer(send, *health_body(self._statuses(), connects))
