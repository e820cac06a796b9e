"""What `POST /v1/runs` and `POST /v1/runs/{id}/stop` accept: checked at the edge.

Plain code with no I/O: the body's bytes in, a `RunRequest` (or `StopRequest`)
out, or a `BadRequest` whose message is what the client reads in the 400. The
messages are Hermes 0.19's where it has one (`Invalid JSON`, `Missing 'input'
field`, `No user message found in input`), so its clients' checks hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from ..errors import BandTrioError

__all__ = ["BadRequest", "HistoryEntry", "RunRequest", "StopRequest", "parse_run", "parse_stop"]

MAX_ID = 256
"""A session id or model name is at most this many characters."""
MAX_REASON = 1000
"""A stop's reason is cut to this many characters."""

_ROLES = {"user": "User", "assistant": "Agent", "system": "System", "developer": "System"}


class BadRequest(BandTrioError):
    """The body cannot start (or stop) a run; the message says why (a 400)."""


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """An earlier message the client gives the run (`conversation_history`, or the
    messages of an `input` array before its last user message)."""

    sender_type: str
    """`"User"`, `"Agent"` or `"System"`, from the OpenAI role."""
    content: str


@dataclass(frozen=True, slots=True)
class RunRequest:
    input: str
    """The user message the run answers."""
    history: tuple[HistoryEntry, ...] = ()
    session_id: str | None = None
    model: str | None = None
    instructions: str | None = None
    on_disconnect: Literal["continue", "cancel"] = "continue"


@dataclass(frozen=True, slots=True)
class StopRequest:
    reason: str | None = None


def _object(body: bytes) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(body) if body.strip() else None
    except msgspec.DecodeError:
        raise BadRequest("Invalid JSON") from None
    except RecursionError:  # msgspec decodes into Python objects recursively
        raise BadRequest("Invalid JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise BadRequest("Invalid JSON: the body must be a JSON object")
    return value


def _text(body: dict[str, Any], name: str, limit: int | None = None) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or (limit is not None and not 0 < len(value) <= limit):
        bound = f" of 1 to {limit} characters" if limit is not None else ""
        raise BadRequest(f"'{name}' must be a string{bound}")
    return value


def _messages(value: Any, name: str) -> list[HistoryEntry]:
    if not isinstance(value, list):
        raise BadRequest(f"'{name}' must be an array of {{role, content}} messages")
    entries = []
    for index, item in enumerate(value):
        role = item.get("role") if isinstance(item, dict) else None
        content = item.get("content") if isinstance(item, dict) else None
        if role not in _ROLES or not isinstance(content, str):
            raise BadRequest(
                f"{name}[{index}] must be {{role: user|assistant|system, content: string}}"
            )
        entries.append(HistoryEntry(_ROLES[role], content))
    return entries


def parse_run(body: bytes) -> RunRequest:
    """The run `body` asks for, or `BadRequest`."""
    fields = _object(body)
    raw = fields.get("input")
    if raw is None or raw == "" or raw == []:
        raise BadRequest("Missing 'input' field")
    if isinstance(raw, str):
        if not raw.strip():
            raise BadRequest("Missing 'input' field: it is blank")
        text, earlier = raw, []
    elif isinstance(raw, list):
        messages = _messages(raw, "input")
        users = [i for i, entry in enumerate(messages) if entry.sender_type == "User"]
        if not users or not messages[users[-1]].content.strip():
            raise BadRequest("No user message found in input")
        text, earlier = messages[users[-1]].content, messages[: users[-1]]
    else:
        raise BadRequest("'input' must be a string or an array of {role, content} messages")
    given = fields.get("conversation_history")
    history = _messages(given, "conversation_history") if given is not None else []
    on_disconnect = fields.get("on_disconnect", "continue")
    if on_disconnect not in ("continue", "cancel"):
        raise BadRequest('\'on_disconnect\' must be "continue" or "cancel"')
    return RunRequest(
        input=text,
        history=(*history, *earlier),
        session_id=_text(fields, "session_id", MAX_ID),
        model=_text(fields, "model", MAX_ID),
        instructions=_text(fields, "instructions"),
        on_disconnect=on_disconnect,
    )


def parse_stop(body: bytes) -> StopRequest:
    """The stop `body` asks for (no body at all is a stop without a reason)."""
    if not body.strip():
        return StopRequest()
    reason = _text(_object(body), "reason")
    cleaned = " ".join((reason or "").split())[:MAX_REASON]
    return StopRequest(cleaned or None)
