"""The exit statuses of `band-trio` (documented in docs/discussion/connection.md)."""

from __future__ import annotations

__all__ = ["EXIT_CONFIG", "EXIT_CRASH", "EXIT_DISCONNECTED", "EXIT_OK", "single"]

EXIT_OK = 0
EXIT_CRASH = 1
"""An unexpected error."""
EXIT_CONFIG = 2
"""Bad usage or configuration."""
EXIT_DISCONNECTED = 3
"""The platform ended the agent's session for good (terminal disconnect, refused key)."""


def single(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups, else `exc` itself: what a
    command reports when an error surfaces from a nursery inside `trio.run`."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
