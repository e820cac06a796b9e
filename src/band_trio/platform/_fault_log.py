"""What every kind of injected fault shares: argument checks and the fault note.

Every fault that takes effect is appended to the request log as a `note`
whose body starts with `"fault:"`, and counted in the stats (`faults` plus
one `faults_*` counter per kind).
"""

from __future__ import annotations

import math
from http import HTTPStatus
from time import perf_counter

from ._log import RequestLog

__all__ = [
    "FaultLog",
    "check_count",
    "check_retry_after",
    "check_status",
    "error_code",
    "retry_after_header",
]


def retry_after_header(retry_after: float) -> tuple[bytes, bytes]:
    text = str(int(retry_after)) if float(retry_after).is_integer() else f"{retry_after:g}"
    return (b"retry-after", text.encode())


def error_code(status: int) -> str:
    """The envelope `code` of a fault-injected error status."""
    if status == 409:
        return "connection_conflict"
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return f"http_{status}"
    return phrase.lower().replace(" ", "_").replace("-", "_")


def check_status(status: int, low: int) -> None:
    if isinstance(status, bool) or not isinstance(status, int) or not low <= status <= 599:
        raise ValueError(f"status must be an integer from {low} to 599, not {status!r}")


def check_count(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, not {count!r}")


def check_retry_after(retry_after: float | None) -> None:
    if retry_after is not None and not (math.isfinite(retry_after) and retry_after >= 0):
        raise ValueError(f"retry_after must be a finite number >= 0, not {retry_after!r}")


class FaultLog:
    """Notes and counts the faults that took effect."""

    def __init__(self, log: RequestLog) -> None:
        self._log = log

    def note(
        self,
        body: str,
        counter: str,
        *,
        agent_id: str | None = None,
        method: str | None = None,
        path: str | None = None,
        query: str | None = None,
        status: int | None = None,
    ) -> None:
        self._log.count("faults")
        self._log.count(counter)
        self._log.append(
            "note", perf_counter(), agent_id=agent_id, method=method, path=path, query=query,
            status=status, body=body,
        )  # fmt: skip
