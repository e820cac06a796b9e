"""A subprocess in its own process group, owned by the turn. (Being written.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._turn import Turn

__all__ = ["CommandResult", "run_command"]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended."""

    returncode: int
    stdout: bytes
    stderr: bytes


async def run_command(
    turn: Turn,
    argv: Sequence[str],
    *,
    input: bytes = b"",
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str = "process group",
) -> CommandResult:
    """Run `argv` in a new process group; an abort ends the whole group."""
    raise NotImplementedError
