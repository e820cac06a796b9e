"""`Idempotency-Key` on `POST /v1/runs`: a retried start is the run it started.

A client that lost the 202 (a timeout, a dropped connection) cannot tell whether
its run started; sending the start again with the same key must not start a
second one. Hermes' rules (`gateway/platforms/api_server_runs.py` @ 4a0f27a):

* the key is 1-255 visible ASCII characters (33-126), else 400
  `invalid_idempotency_key`; a blank header is no key;
* the request is fingerprinted by its parsed JSON (sorted keys, so the same body
  spelled otherwise is the same request);
* the same key and fingerprint → 202 `{"run_id", "status": <its status now>,
  "replayed": true}` with `Idempotency-Replayed: true`, even at the concurrent-run
  limit; the same key with another fingerprint → 409 `idempotency_key_conflict`.

Hermes keeps keys 24 h in sqlite. Here they are kept in memory, bounded in time
(`RunsPolicy.idempotency_retention`) and count (`max_idempotency_keys`, oldest
first), and never past their run's record: a key whose run was forgotten names
nothing a client could read, so it starts anew. Only a started run is remembered
(a 400, 429 or 503 is not, so its retry is judged afresh). Plain code, no I/O:
`start` looks up and reserves in one synchronous step, so two retries racing
each other cannot both start a run.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import msgspec
import trio

from ..server import HttpError
from ._run import Run

__all__ = ["IdempotencyKeys", "fingerprint", "idempotency_key"]

MAX_KEY = 255


def idempotency_key(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The request's key (None without one), or a 400 in Hermes' words."""
    given = [value for name, value in headers if name == b"idempotency-key"]
    if not given:
        return None
    key = given[0].strip()
    if len(given) > 1 or len(key) > MAX_KEY or any(byte < 33 or byte > 126 for byte in key):
        raise HttpError(
            400,
            "invalid_idempotency_key",
            "Idempotency-Key must be 1-255 visible ASCII characters",
        )
    return key.decode("ascii") or None


def fingerprint(body: bytes) -> str:
    """What makes two starts the same request: the body's JSON, keys sorted. Called on
    a body `parse_run` accepted, so it decodes."""
    value: Any = msgspec.json.decode(body)
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class _Entry:
    fingerprint: str
    run: Run
    expires_at: float


class IdempotencyKeys:
    """The keys of started runs, oldest first, bounded in time and count."""

    def __init__(self, retention: float, limit: int) -> None:
        self._retention = retention
        self._limit = limit
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def replay(self, key: str, print_: str) -> Run | None:
        """The run `key` started, if it did with this request; a 409 if it did with
        another; None if the key names nothing (now)."""
        self._prune()
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.fingerprint != print_:
            raise HttpError(
                409,
                "idempotency_key_conflict",
                "Idempotency-Key was already used with a different request payload",
            )
        return entry.run

    def remember(self, key: str, print_: str, run: Run) -> None:
        """`key` started `run` (after `replay` said it named nothing: no await between)."""
        self._entries[key] = _Entry(print_, run, trio.current_time() + self._retention)
        self._prune()

    def _prune(self) -> None:
        """Forget keys past their window or their run's, and the oldest past the limit:
        a walk over at most `limit` entries, once per start that carries a key."""
        now = trio.current_time()
        while len(self._entries) > self._limit:
            self._entries.popitem(last=False)
        gone = [
            key
            for key, entry in self._entries.items()
            if entry.expires_at <= now or entry.run.forgotten.is_set()
        ]
        for key in gone:
            del self._entries[key]
