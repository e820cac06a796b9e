"""What the agent routes that write refuse, as band-client-rest 0.0.51 documents it.

Each check raises the 422 the route answers; none writes anything, so a refused
request changes nothing.
"""

from __future__ import annotations

import msgspec

from ..wire import (
    EVENT_CONTENT_CHARS,
    EVENT_METADATA_BYTES,
    MESSAGE_ATTACHMENTS,
    MESSAGE_CONTENT_BYTES,
    ActivityDetail,
    NewEvent,
    NewMessage,
)
from ._http import HttpError

__all__ = ["check_activity", "check_event", "check_message"]

EVENT_TYPES = frozenset({"tool_call", "tool_result", "thought", "error", "task", "attention"})
ATTENTION_KINDS = frozenset({"question", "assumption", "failure", "review"})
ACTIVITY_KINDS = frozenset({"reasoning", "tool_call", "memory", "permission"})

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
