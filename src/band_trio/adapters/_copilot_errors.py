"""The Copilot adapter's errors: what its JSON-RPC peer (`_jsonrpc`) raises for the CLI."""

from __future__ import annotations

from ..errors import BandTrioError

__all__ = ["CopilotError", "CopilotGone", "CopilotRpcError"]


class CopilotError(BandTrioError):
    """The Copilot CLI could not be started, refused a call, failed a message or exited."""


class CopilotRpcError(CopilotError):
    """The CLI answered a call with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method} answered error {code}: {message[:300]}")
        self.method = method
        self.code = code


class CopilotGone(CopilotError):
    """The connection to the CLI is closed (the process exited, or is being stopped)."""
