"""`GET /v1/runs`: the runs still kept, newest first, a bounded page at a time.

Hermes has no listing of runs (its routes @ 4a0f27a: start, status, events,
approval, steer, stop; #109222 asks for one), so the page is OpenAI's list
shape, the one Hermes' `/v1/models` answers with: `{"object": "list", "data",
"first_id", "last_id", "has_more"}`, paged by `limit` (1 to
`RunsPolicy.max_list_page`, 20 by default) and `after` (the `last_id` of the
page before), filtered by `status` (one of Hermes' run statuses).

A page lists only what the server still keeps (live runs, and settled ones in
their retention window) and each run as its `hermes.run` status object without
its `output`: a page of 100 runs must not carry 100 outputs of up to a million
characters each (`GET /v1/runs/{id}` has it). A cursor whose run was forgotten
meanwhile is a 400, not a silent restart from the top. Plain code: the query
string in, the page out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl

from ..server import HttpError
from ._run import Run, RunStatus

__all__ = ["STATUSES", "list_runs"]

STATUSES = frozenset(status.value for status in RunStatus)
"""Hermes' run statuses (its idempotency store's `_KNOWN_SQL` @ 4a0f27a: the same)."""

DEFAULT_LIMIT = 20
_MAX_QUERY = 4096


def _bad(message: str) -> HttpError:
    return HttpError(400, "invalid_request", message)


def _query(raw: bytes) -> dict[str, str]:
    if len(raw) > _MAX_QUERY:
        raise _bad("the query string is too long")
    pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    names = [name for name, _ in pairs]
    unknown = sorted(set(names) - {"limit", "after", "status"})
    if unknown:
        raise _bad(f"unknown query parameter {unknown[0]!r}: use limit, after, status")
    if len(names) != len(set(names)):
        raise _bad("each of limit, after, status may be given once")
    return dict(pairs)


def list_runs(runs: dict[str, Run], raw_query: bytes, max_page: int) -> dict[str, Any]:
    """The page the query asks for, or a 400 saying what is wrong with it."""
    query = _query(raw_query)
    given = query.get("limit", str(DEFAULT_LIMIT))
    if not given.isdigit() or not 1 <= int(given) <= max_page:
        raise _bad(f"'limit' must be a whole number from 1 to {max_page}")
    limit = int(given)
    status = query.get("status")
    if status is not None and status not in STATUSES:
        raise _bad(f"'status' must be one of: {', '.join(sorted(STATUSES))}")
    newest_first: Iterable[Run] = reversed(runs.values())
    after = query.get("after")
    if after is not None:
        if after not in runs:
            raise _bad(f"'after' names no run kept now: {after[:80]}")
        newest_first = _after(newest_first, after)
    page: list[Run] = []
    more = False
    for run in newest_first:
        if status is not None and run.status.value != status:
            continue
        if len(page) == limit:
            more = True
            break
        page.append(run)
    data = [_item(run) for run in page]
    return {
        "object": "list",
        "data": data,
        "first_id": page[0].id if page else None,
        "last_id": page[-1].id if page else None,
        "has_more": more,
    }


def _after(runs: Iterable[Run], run_id: str) -> Iterable[Run]:
    iterator = iter(runs)
    for run in iterator:
        if run.id == run_id:
            break
    return iterator


def _item(run: Run) -> dict[str, Any]:
    body = run.status_body()
    body.pop("output", None)
    return body
