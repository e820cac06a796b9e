"""Which ids the platform accepts: those every route can address again.

An id travels as one percent-encoded path segment (`/chats/{room}/...`), and
ASGI hands the app the decoded path, so a `/` inside an id would split the
segment and no route could reach the room (or agent, or user) again. `?`,
`#` and `%` round-trip once the client encodes them, as band-trio's does.
Control characters and very long ids are refused too: they cannot be told
apart in a log or a URL.
"""

from __future__ import annotations

__all__ = ["MAX_ID_LENGTH", "check_id"]

MAX_ID_LENGTH = 128


def check_id(kind: str, value: str) -> str:
    """`value` if it is an id the platform can address again, else `ValueError`."""
    if not value or not value.strip():
        raise ValueError(f"a {kind} id must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"a {kind} id is at most {MAX_ID_LENGTH} characters")
    if "/" in value:
        raise ValueError(f"a {kind} id cannot contain '/': no route could address it")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
        raise ValueError(f"a {kind} id cannot contain control characters")
    return value
