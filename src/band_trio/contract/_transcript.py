"""Transcript integrity after an abort mid tool-calls (semantics §9). (Being written.)"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["close_tool_calls", "not_run_note"]


def not_run_note(kind: Literal["interrupt", "stop"], reason: str | None = None) -> str:
    """The result text of a tool call that never ran because the turn was aborted."""
    raise NotImplementedError


def close_tool_calls(
    messages: list[dict[str, Any]], kind: Literal["interrupt", "stop"], reason: str | None = None
) -> list[dict[str, Any]]:
    """Give every tool call in `messages` that has no result one that says it did not run."""
    raise NotImplementedError
