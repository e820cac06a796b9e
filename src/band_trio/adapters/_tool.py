"""A function the model may call (`Tool`), and how a reference adapter runs one.

Shared by the model adapters (OpenAI chat completions, Anthropic Messages): the
same `Tool` is given to either, and a call runs the same way whichever API asked
for it — its events posted to the room, its exception turned into a result the
model reads.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..contract import Turn
from ..errors import ConfigurationError

__all__ = ["CUT_OFF_NOTE", "Tool", "ToolFn", "run_tool", "tool_table"]

ToolFn = Callable[[dict[str, Any], Turn], Awaitable[str]]

CUT_OFF_NOTE = "not run: the turn was cut off before this tool call finished"
"""The result of a tool call closed after an abort no signal explained (a turn
deadline, a shutdown): `not_run_note` says which signal, this says only that."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model may call.

    `run` gets the call's arguments, parsed (a dict), and the turn (for the turn's
    helpers: `run_command`, `run_in_thread`, `turn.remote`), and returns the text
    the model reads as the result. It runs inside the turn: an abort cancels it
    where it awaits. An exception it raises becomes an `error: ...` result
    (the model can recover from a failed tool); it does not fail the turn."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """The arguments' JSON schema (`{"type": "object", "properties": {...}}`)."""
    run: ToolFn

    def spec(self) -> dict[str, Any]:
        """As OpenAI's chat completions API declares a tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def tool_table(tools: Sequence[Tool]) -> dict[str, Tool]:
    """The tools by name; names that are not unique, or not what both APIs accept
    (1 to 64 of `A-Z a-z 0-9 _ -`), are a `ConfigurationError`."""
    names = [tool.name for tool in tools]
    bad = [name for name in names if not _TOOL_NAME.match(name)]
    if bad or len(set(names)) != len(names):
        raise ConfigurationError(f"tool names must be unique and match [A-Za-z0-9_-]: {names}")
    return {tool.name: tool for tool in tools}


async def run_tool(
    turn: Turn,
    tool: Tool | None,
    name: str,
    call_id: str,
    arguments: object,
    *,
    shown: str,
    post_events: bool,
) -> str:
    """Run one call the model asked for; the text it reads as the result.

    `tool` is None for a name no tool has; `arguments` are the call's, parsed (not
    a dict: an error result); `shown` is how the `tool_call` event writes them.
    With `post_events`, the call and its result are posted to the room as
    `tool_call` and `tool_result` events (metadata: `tool_call_id`, `name`)."""
    if tool is None:
        return f"error: there is no tool named {name!r}"
    if not isinstance(arguments, dict):
        return "error: the arguments must be a JSON object"
    if post_events:
        await turn.send_event(
            f"{name}({shown})",
            message_type="tool_call",
            metadata={"tool_call_id": call_id, "name": name, "arguments": arguments},
        )
    try:
        result = str(await tool.run(arguments, turn))
    except Exception as exc:  # the model reads it and can try something else
        result = f"error: {type(exc).__name__}: {exc}"
    if post_events:
        await turn.send_event(
            result or "(empty)",
            message_type="tool_result",
            metadata={"tool_call_id": call_id, "name": name},
        )
    return result
