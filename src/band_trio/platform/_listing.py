"""The two paginated message routes, as band-client-rest 0.0.51 documents them.

    GET .../messages    the agent's messages by delivery status (no `status`:
                        everything not processed), `limit` 20 by default
    GET .../context     what the agent sent or was sent, `limit` 50 by default

Both are oldest first on a keyset cursor (`cursor` + `limit`, at most 100;
`next_cursor` and `has_more` in the metadata); `/messages` also takes
`sort_order=desc`, newest first. `page` / `page_size` are the deprecated
offset path: a request that uses them gets the page fields in its metadata,
and on `/messages` the `Deprecation` and `Sunset` headers. The cursor is the
boundary message's `seq`, opaque to clients.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..server import HttpError
from ..wire import PAGE_LIMIT_MAX, ContextMeta, MessagePage
from ._payloads import chat_message
from ._platform import Platform
from ._responses import Response, json_response
from ._route_args import int_param, member
from ._store import Agent, Delivery, Message
from ._store_pages import STATUS_FILTERS

__all__ = ["LIST_LIMIT", "MAX_LIMIT", "SUNSET", "context", "list_messages"]

LIST_LIMIT = 20
"""`GET .../messages`: the documented default `limit` (and the page path's `page_size`)."""
CONTEXT_LIMIT = 50
"""`GET .../context`: the documented default `limit`."""
MAX_LIMIT = PAGE_LIMIT_MAX
SUNSET = "Thu, 01 Oct 2026 00:00:00 GMT"
"""When `page` / `page_size` go away: "removed in API 2.0.0 (2026-10-01)"."""
_DEPRECATED: tuple[tuple[bytes, bytes], ...] = (
    (b"deprecation", b"true"),
    (b"sunset", SUNSET.encode()),
)
_ORDERS = ("asc", "desc")


@dataclass(frozen=True, slots=True)
class _Window:
    """One request's page: by cursor (`page` None) or, deprecated, by page number."""

    limit: int
    cursor: int | None
    page: int | None

    @classmethod
    def of(cls, query: Mapping[str, str], default: int) -> _Window:
        if "page" in query or "page_size" in query:
            size = int_param(query, "page_size", default, 1, MAX_LIMIT)
            return cls(size, None, int_param(query, "page", 1, 1, 1_000_000))
        cursor = int_param(query, "cursor", 0, 0, 2**62) if "cursor" in query else None
        return cls(int_param(query, "limit", default, 1, MAX_LIMIT), cursor, None)

    def paged_meta(self, total: int, status: str | None = None) -> ContextMeta:
        assert self.page is not None
        pages = max(1, math.ceil(total / self.limit))
        return ContextMeta(
            has_more=self.page < pages, limit=self.limit, page=self.page,
            page_size=self.limit, total_count=total, total_pages=pages, status_filter=status,
        )  # fmt: skip


def _choice(query: Mapping[str, str], name: str, allowed: tuple[str | None, ...]) -> str | None:
    value = query.get(name)
    if value not in allowed:
        shown = ", ".join(a for a in allowed if a is not None)
        raise HttpError(
            422,
            "validation_error",
            f"{name} must be one of {shown}",
            {f"/{name}": [f"is invalid: {value[:64]!r}" if value else "is invalid"]},
        )
    return value


def list_messages(
    p: Platform, agent: Agent, query: Mapping[str, str], body: bytes, room: str
) -> Response:
    """The agent's messages in the room, filtered by delivery status."""
    member(p, agent, room)
    status = _choice(query, "status", tuple(STATUS_FILTERS))
    newest_first = _choice(query, "sort_order", (None, *_ORDERS)) == "desc"
    window = _Window.of(query, LIST_LIMIT)
    store = p.store
    if window.page is not None:
        rows = store.deliveries_page(
            agent.id, room, status, limit=window.limit, offset=(window.page - 1) * window.limit
        )
        meta = window.paged_meta(store.count_deliveries(agent.id, room, status), status)
        headers = _DEPRECATED
    else:
        after, before = (None, window.cursor) if newest_first else (window.cursor, None)
        rows = store.deliveries_page(
            agent.id, room, status, limit=window.limit + 1, after=after, before=before,
            newest_first=newest_first,
        )  # fmt: skip
        meta = _cursor_meta(rows, window.limit, status)
        rows = rows[: window.limit]
        headers = ()
    messages = [chat_message(m, agent.id, d) for m, d in rows]
    return Response(200, json_response(MessagePage(data=messages, metadata=meta)).body, headers)


def context(
    p: Platform, agent: Agent, query: Mapping[str, str], body: bytes, room: str
) -> Response:
    """What the agent sent, and what it was sent, in the room: oldest first."""
    member(p, agent, room)
    window = _Window.of(query, CONTEXT_LIMIT)
    store = p.store
    if window.page is not None:
        offset = (window.page - 1) * window.limit
        rows = store.context_page(agent.id, room, limit=window.limit, offset=offset)
        meta = window.paged_meta(store.count_context(agent.id, room))
    else:
        rows = store.context_page(agent.id, room, limit=window.limit + 1, after=window.cursor)
        meta = _cursor_meta(rows, window.limit)
        rows = rows[: window.limit]
    messages = [chat_message(m, agent.id, d) for m, d in rows]
    return json_response(MessagePage(data=messages, metadata=meta))


def _cursor_meta(
    rows: Sequence[tuple[Message, Delivery | None]], limit: int, status: str | None = None
) -> ContextMeta:
    """`rows` holds up to `limit + 1`: one more than the page says there is more."""
    has_more = len(rows) > limit
    cursor = str(rows[limit - 1][0].seq) if has_more else None
    return ContextMeta(has_more=has_more, limit=limit, next_cursor=cursor, status_filter=status)
