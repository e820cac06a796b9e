"""The exit statuses of `band-trio` (documented in docs/discussion/connection.md)."""

from __future__ import annotations

__all__ = ["EXIT_CONFIG", "EXIT_CRASH", "EXIT_DISCONNECTED", "EXIT_OK"]

EXIT_OK = 0
EXIT_CRASH = 1
"""An unexpected error."""
EXIT_CONFIG = 2
"""Bad usage or configuration."""
EXIT_DISCONNECTED = 3
"""The platform ended the agent's session for good (terminal disconnect, refused key)."""
