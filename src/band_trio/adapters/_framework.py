"""What the asyncio framework adapters (LangGraph, the OpenAI Agents SDK) share.

* `load_named`: the user's graph or agent, named `MODULE:ATTR` by a `BAND_*` variable;
* `conversation`: the room's recent history, up to the message being answered, as
  plain chat lines (each framework turns them into its own message objects);
* `cut_note`: what a tool call left without its result by an abort is answered with.

No framework is imported here: each adapter's module imports its own, so naming one
adapter never imports the other's framework.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Literal

from ..contract import Message, Turn, not_run_note
from ..errors import ConfigurationError

__all__ = ["UNEXPLAINED", "Said", "conversation", "cut_note", "load_named"]

UNEXPLAINED = "not run: the turn was cut off before this tool call finished"
"""A dangling tool call's result when no user's signal explains the cut (a turn
deadline, a shutdown, an earlier run of the agent): the OpenAI chat adapter's words."""

Role = Literal["user", "assistant", "system"]


@dataclass(frozen=True, slots=True)
class Said:
    """One line of the room's conversation, as a chat model reads it."""

    role: Role
    content: str
    id: str
    """The platform's message id: a framework that keeps the conversation itself (a
    LangGraph checkpointer) tells a message it has from one it has not by it."""


def load_named(variable: str, kind: type[object], what: str) -> object:
    """The `kind` named by `MODULE:ATTR` in the environment variable `variable`.

    MODULE is imported from the current folder or the installed packages; ATTR is the
    object itself or a function that takes no argument and returns it (called here:
    a fresh one per adapter, which the tests' per-probe runs need)."""
    spec = os.environ.get(variable, "").strip()
    module_name, colon, attr = spec.partition(":")
    if not spec:
        raise ConfigurationError(f"{variable} is not set (MODULE:ATTR naming {what})")
    if not colon or not module_name or not attr:
        raise ConfigurationError(f"{variable} must be MODULE:ATTR naming {what}, not {spec!r}")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:  # a console script's path lacks it
        sys.path.insert(0, here)
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # ImportError, AttributeError, or the module's own error
        raise ConfigurationError(f"{variable}: cannot load {spec!r}: {exc!r}") from exc
    if not isinstance(found, kind) and callable(found):
        try:
            found = found()
        except ConfigurationError:
            raise
        except Exception as exc:
            raise ConfigurationError(f"{variable}: {spec}() raised {exc!r}") from exc
    if not isinstance(found, kind):
        raise ConfigurationError(
            f"{variable}: {spec} is {type(found).__name__}, not {what} ({kind.__name__})"
        )
    return found


async def conversation(turn: Turn, me: str | None, limit: int) -> list[Said]:
    """The room's text messages up to and including the one being answered, the newest
    `limit` of them, oldest first.

    The agent's own messages are the assistant's (`me`: its id, from `on_started`;
    without it, any agent's message is, as in a run of the runs API), a `System`
    sender's the system's, everyone else's the user's. Events (tool calls, thoughts)
    are left out: the room shows them, the model never said them as answers."""
    messages: list[Message] = list(await turn.history())
    ids = [message.id for message in messages]
    if turn.message.id in ids:  # what came in after it is for later turns
        messages = messages[: ids.index(turn.message.id) + 1]
    else:
        messages.append(turn.message)
    said = [
        Said(_role(message, me), message.content, message.id)
        for message in messages
        if message.content.strip()
        and (message.message_type == "text" or message.id == turn.message.id)
    ]
    return said[-limit:]


def _role(message: Message, me: str | None) -> Role:
    if message.sender_type == "Agent" and (me is None or message.sender_id == me):
        return "assistant"
    if message.sender_type == "System":
        return "system"
    return "user"


def cut_note(cut: str | None, turn: Turn) -> str:
    """The result given to a tool call an aborted turn left without one: why it did not
    run, in `not_run_note`'s words when the room's last abort (`turn.last_abort`) was
    the one that cut message `cut` off."""
    abort = turn.last_abort
    if cut is not None and abort is not None and abort.message_id == cut:
        return not_run_note(abort.kind, abort.reason)
    return UNEXPLAINED
