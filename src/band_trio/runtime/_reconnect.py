"""When to reconnect, and how long to wait first (sans-IO: no trio, no sockets).

    delay = uniform(d/2, d), d = min(cap, base * 2**failures)      (equal jitter)

`failures` counts connections that failed or did not stay up for
`stable_after` seconds, so a platform that accepts and then drops at once is
retried ever more slowly instead of in a tight loop. A `Retry-After` from the
platform is honoured: the wait is never shorter than it says.
"""

from __future__ import annotations

import random

__all__ = ["TERMINAL_CLOSE_CODES", "TERMINAL_UPGRADE_STATUSES", "Backoff"]

TERMINAL_UPGRADE_STATUSES = frozenset({400, 401, 403, 404, 409})
"""An upgrade refused with these is final: a wrong key, or a websocket URL with a path
the platform does not serve (404), is not retried forever."""
TERMINAL_CLOSE_CODES = frozenset({1008})
"""A close with these (policy violation) is final."""
_JITTER = random.Random()
"""One generator for every link's jitter: a `Random` of its own per link is 2.5 KB of
state (and a seed read from the OS) for each of a bridge's thousand identities."""


class Backoff:
    """Capped exponential backoff with equal jitter for the reconnect loop."""

    def __init__(
        self,
        *,
        base: float,
        cap: float,
        stable_after: float,
        rng: random.Random | None = None,
    ) -> None:
        self.base = base
        self.cap = cap
        self.stable_after = stable_after
        self.failures = 0
        self._rng = rng or _JITTER
        self._connected_at: float | None = None

    def connected(self, now: float) -> None:
        self._connected_at = now

    def disconnected(self, now: float) -> None:
        """A connection ended; if it had been up long enough, start afresh."""
        if self._connected_at is not None and now - self._connected_at >= self.stable_after:
            self.failures = 0
        self._connected_at = None

    def delay(self, retry_after: float | None = None) -> float:
        """The wait before the next attempt (and count this failure)."""
        ceiling = min(self.cap, self.base * 2**self.failures)
        self.failures += 1
        wait = self._rng.uniform(ceiling / 2, ceiling)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return wait
