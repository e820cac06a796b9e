"""Which ids the platform accepts: those every route can address again, and a person
can tell apart.

An id travels as one percent-encoded path segment (`/chats/{room}/...`), and
ASGI hands the app the decoded path, so a `/` inside an id would split the
segment and no route could reach the room (or agent, or user) again. `?`,
`#` and `%` round-trip once the client encodes them, as band-trio's does.
Control characters and very long ids are refused too: they cannot be told
apart in a log or a URL. For the same reason an id must show something once
the invisible characters are gone (format characters such as U+200B ZERO WIDTH
SPACE, whitespace, controls): `"\\u200b"` and `"\\u200c"` look alike, and like
nothing. And no bidi control may appear in one at all (U+202E RIGHT-TO-LEFT
OVERRIDE, the isolates U+2066..U+2069, the marks): it reorders the text around
it, so `room\\u202egnp.exe` shows as `roomexe.png` in a log or the console.
"""

from __future__ import annotations

import unicodedata

__all__ = ["BIDI_CONTROLS", "MAX_ID_LENGTH", "check_id", "shows_nothing"]

MAX_ID_LENGTH = 128
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
"""Unicode's bidirectional formatting characters (UAX #9, table 1)."""


def shows_nothing(value: str) -> bool:
    """`value` has no character a reader would see: only format characters (category
    Cf), whitespace and controls."""
    return all(c.isspace() or unicodedata.category(c) in ("Cf", "Cc") for c in value)


def check_id(kind: str, value: str) -> str:
    """`value` if it is an id the platform can address again, else `ValueError`."""
    if shows_nothing(value):
        raise ValueError(f"a {kind} id must not be empty or only invisible characters")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"a {kind} id is at most {MAX_ID_LENGTH} characters")
    if "/" in value:
        raise ValueError(f"a {kind} id cannot contain '/': no route could address it")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value):
        raise ValueError(f"a {kind} id cannot contain control characters")
    if not BIDI_CONTROLS.isdisjoint(value):
        raise ValueError(f"a {kind} id cannot contain bidi controls (U+202E and the like)")
    return value
