"""What the agent routes that write refuse, as band-client-rest 0.0.51 documents it; and
the caps on the texts the admin API (and `Platform`'s methods) keep.

Each route check raises the 422 the route answers; none writes anything, so a
refused request changes nothing. The text checks raise `ValueError`, which the
admin API answers 422: a profile's name, handle and description, a room's title,
an agent's key and a control's reason are kept, and the console streams names,
handles and titles to every open page on every change (a 7 MB name once sent
306 MB down one stream in 10 s), so each has a cap of its own. A handle is also
one word the console can mention: letters, digits, `_`, `.` and `-`.
"""

from __future__ import annotations

import re

import msgspec

from ..server import HttpError
from ..wire import (
    EVENT_CONTENT_CHARS,
    EVENT_METADATA_BYTES,
    MESSAGE_ATTACHMENTS,
    MESSAGE_CONTENT_BYTES,
    ActivityDetail,
    NewEvent,
    NewMessage,
)

__all__ = [
    "DESCRIPTION_CHARS",
    "HANDLE_CHARS",
    "KEY_CHARS",
    "NAME_CHARS",
    "REASON_CHARS",
    "TITLE_CHARS",
    "check_activity",
    "check_event",
    "check_handle",
    "check_message",
    "check_text",
]

EVENT_TYPES = frozenset({"tool_call", "tool_result", "thought", "error", "task", "attention"})
ATTENTION_KINDS = frozenset({"question", "assumption", "failure", "review"})
ACTIVITY_KINDS = frozenset({"reasoning", "tool_call", "memory", "permission"})

NAME_CHARS = 100
"""An agent's or a user's name."""
HANDLE_CHARS = 64
"""A handle (`@handle`)."""
DESCRIPTION_CHARS = 1000
"""An agent's description."""
KEY_CHARS = 256
"""An agent's API key given through the admin API."""
TITLE_CHARS = 200
"""A room's title."""
REASON_CHARS = 1000
"""The reason of a control (`interrupt`, `stop`, `play`), pushed to the agent."""

_HANDLE = re.compile(r"[\w.-]+")
"""What the console takes for a handle after an `@` (`_console._MENTION`)."""
_encode = msgspec.json.Encoder().encode


def _invalid(field: str, problem: str, code: str = "validation_error") -> HttpError:
    return HttpError(422, code, f"{field} {problem}", {f"/{field}": [problem]})


def check_message(new: NewMessage) -> None:
    """`POST /messages`: at least one mention, at most 512 KiB, only the room's files
    (the stand-in holds none, so any attachment id is unknown)."""
    if not new.mentions:
        raise _invalid("mentions", "must name at least one participant")
    if len(new.content.encode("utf-8", "surrogatepass")) > MESSAGE_CONTENT_BYTES:
        raise _invalid("content", f"is over {MESSAGE_CONTENT_BYTES} bytes of UTF-8")
    attachments = new.attachment_ids if isinstance(new.attachment_ids, list) else []
    if len(attachments) > MESSAGE_ATTACHMENTS:
        raise _invalid("attachment_ids", f"holds more than {MESSAGE_ATTACHMENTS} files")
    if attachments:
        raise _invalid("attachment_ids", "names a file not in this room", "unknown_attachment")


def check_event(event: NewEvent) -> None:
    """`POST /events`: a documented type, content and metadata within their caps, and an
    `attention` event's `metadata.kind`."""
    if event.message_type not in EVENT_TYPES:
        raise _invalid("message_type", f"must be one of {', '.join(sorted(EVENT_TYPES))}")
    if len(event.content) > EVENT_CONTENT_CHARS:
        raise _invalid("content", f"is over {EVENT_CONTENT_CHARS} characters")
    metadata = event.metadata
    if metadata is not None and len(_encode(metadata)) > EVENT_METADATA_BYTES:
        raise _invalid("metadata", f"is over {EVENT_METADATA_BYTES} bytes")
    if event.message_type == "attention" and (metadata or {}).get("kind") not in ATTENTION_KINDS:
        raise _invalid("metadata", f"kind must be one of {', '.join(sorted(ATTENTION_KINDS))}")


def check_activity(detail: ActivityDetail | None) -> None:
    """`POST /activity`: a known `kind`; a `name` for a tool call, and for nothing else."""
    if detail is None:
        return
    if detail.kind not in ACTIVITY_KINDS:
        raise _invalid("activity", f"kind must be one of {', '.join(sorted(ACTIVITY_KINDS))}")
    if (detail.kind == "tool_call") != (detail.name is not None):
        raise _invalid("activity", "name is required for a tool_call and only for one")


def check_text(field: str, value: str | None, chars: int) -> str | None:
    """`value` if it is at most `chars` characters (or None), else `ValueError`."""
    if value is not None and len(value) > chars:
        raise ValueError(f"{field} is at most {chars} characters, not {len(value):,}")
    return value


def check_handle(value: str | None) -> str | None:
    """`value` if it is a handle the console can mention (or None or empty: the
    default), else `ValueError`."""
    check_text("handle", value, HANDLE_CHARS)
    if value and not _HANDLE.fullmatch(value):
        raise ValueError(f"handle {value!r} is not one word: use letters, digits, '_', '.' and '-'")
    return value
