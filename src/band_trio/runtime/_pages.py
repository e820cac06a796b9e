"""A walk through a cursor-paginated list (sans-IO): where it stands, and whether to go on.

The platform pages `GET .../messages` on a keyset cursor: `has_more` and
`next_cursor` say whether there is a next page and where it starts. A platform
that is broken or hostile can answer `has_more` for ever, with the same cursor
or a new one each time; a walk then stops at the first repeated cursor or after
`Policy.scan_pages` pages, with a warning, rather than asking for ever.
"""

from __future__ import annotations

import logging

from ..wire import ContextMeta

__all__ = ["Pages"]

log = logging.getLogger("band_trio.runtime.room")


class Pages:
    """`cursor` is the next page's (None: the first); `more` whether there is one."""

    __slots__ = ("_limit", "_pages", "_seen", "_what", "cursor", "more")

    def __init__(self, limit: int, what: str) -> None:
        self._limit = limit
        self._what = what
        self._pages = 0
        self._seen: set[str] = set()
        self.cursor: str | None = None
        self.more = True

    def advance(self, meta: ContextMeta) -> None:
        """A page arrived with `meta`: move to the next one, or end the walk."""
        self._pages += 1
        cursor = meta.next_cursor
        if not meta.has_more or cursor is None:
            self.more = False
        elif cursor in self._seen or self._pages >= self._limit:
            why = "repeated its cursor" if cursor in self._seen else f"ran past {self._limit} pages"
            log.warning("%s: the list %s; the walk ends here", self._what, why)
            self.more = False
        else:
            self._seen.add(cursor)
            self.cursor = cursor
