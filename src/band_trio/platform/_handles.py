"""Handles: each names one participant, agent or user.

The console sends `@handle` to the room's participant with that handle,
matched without case, and a person reads handles in every list: two
participants with one handle would send a mention to either. So a handle is
refused when another participant's handle is the same to a reader: the same
after Unicode compatibility folding and case folding (`BOT`, fullwidth `\uff42\uff4f\uff54`
and `bot` are one). A default handle (`agent-1a2b3c4d`, from the id) takes the first free
`-2`, `-3`, ... suffix, since two ids may share their first characters.

A database written before this rule may hold two participants with one handle;
they are kept (the first loaded owns it), and new ones are checked against both.
"""

from __future__ import annotations

import itertools
import unicodedata

__all__ = ["Handles", "handle_key"]


def handle_key(handle: str) -> str:
    """What two handles a reader cannot tell apart have in common."""
    return unicodedata.normalize("NFKC", handle).casefold()


class Handles:
    """Who owns each handle (by `handle_key`)."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}

    def add(self, handle: str, pid: str) -> None:
        """Record `pid`'s handle (a loaded one keeps its first owner)."""
        self._owners.setdefault(handle_key(handle), pid)

    def check(self, handle: str) -> str:
        """`handle` if no participant has it, else `ValueError` naming the owner."""
        owner = self._owners.get(handle_key(handle))
        if owner is not None:
            raise ValueError(f"handle {handle!r} is taken (by {owner}): give another")
        return handle

    def free(self, base: str) -> str:
        """`base`, or `base-2`, `base-3`, ...: the first no participant has."""
        for name in itertools.chain((base,), (f"{base}-{n}" for n in itertools.count(2))):
            if handle_key(name) not in self._owners:
                return name
        raise AssertionError("unreachable: the count is endless")
