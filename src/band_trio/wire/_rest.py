"""REST request and response bodies of the agent API (docs/reference/platform.md).

One set of Structs serves both sides: the client decodes responses and encodes
requests; the embedded platform does the reverse. Every response is wrapped in
`{"data": ...}`; errors use `ErrorEnvelope`.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from ._events import MessageMetadata

__all__ = [
    "EVENT_CONTENT_CHARS",
    "EVENT_METADATA_BYTES",
    "MESSAGE_ATTACHMENTS",
    "MESSAGE_CONTENT_BYTES",
    "PAGE_LIMIT_MAX",
    "ActivityDetail",
    "ActivityReport",
    "AgentProfile",
    "ChatMessage",
    "ContextMeta",
    "Data",
    "ErrorBody",
    "ErrorEnvelope",
    "EventCreated",
    "FailedMark",
    "LifecycleResult",
    "MentionRef",
    "MessagePage",
    "NewEvent",
    "NewEventBody",
    "NewMessage",
    "NewMessageBody",
    "PageMeta",
    "Participant",
    "PostedMessage",
    "Recipient",
    "RoomPage",
    "RoomSummary",
    "cut_event_content",
]

T = TypeVar("T")

# The platform's documented limits (band-client-rest 0.0.51), shared by both sides.
MESSAGE_CONTENT_BYTES = 512 * 1024
"""A message's content: at most 512 KiB of UTF-8 (a longer one is refused 422)."""
MESSAGE_ATTACHMENTS = 10
"""Attachments one message may list."""
EVENT_CONTENT_CHARS = 16384
"""An event's content: at most this many characters..."""
EVENT_METADATA_BYTES = 65536
"""...and its metadata at most this many bytes, serialized."""
PAGE_LIMIT_MAX = 100
"""The largest `limit` (or `page_size`) a paginated route honours."""


def cut_event_content(content: str, limit: int = EVENT_CONTENT_CHARS) -> str:
    """An event's `content` within `limit` characters: its head and tail, and a note
    of how much was cut between them (64 characters of it, whatever the count)."""
    if len(content) <= limit:
        return content
    marker = f"\n… [{len(content) - limit + 64} characters cut] …".ljust(63) + "\n"
    keep = limit - len(marker)
    head = keep - keep // 2
    return f"{content[:head]}{marker}{content[len(content) - keep // 2 :]}"


class _Body(msgspec.Struct, kw_only=True, omit_defaults=True, gc=False):
    pass


class Data(_Body, Generic[T]):
    """The `{"data": ...}` wrapper of every successful response."""

    data: T


class AgentProfile(_Body):
    """`GET /api/v1/agent/me`."""

    id: str
    name: str
    handle: str
    owner_uuid: str
    feature_flags: dict[str, bool]
    inserted_at: str
    updated_at: str
    description: str | None = None
    avatar_url: str | None = None
    listed_in_directory: bool = False
    tags: list[str] = msgspec.field(default_factory=list)


class RoomSummary(_Body):
    """One room of `GET /api/v1/agent/chats`."""

    id: str
    inserted_at: str
    updated_at: str
    title: str | None = None
    task_id: str | None = None


class PageMeta(_Body):
    page: int | None = None
    page_size: int | None = None
    total_count: int | None = None
    total_pages: int | None = None


class RoomPage(_Body):
    data: list[RoomSummary]
    metadata: PageMeta = msgspec.field(default_factory=PageMeta)


class ChatMessage(_Body):
    """A message as REST returns it (`/next`, `/context`, `/messages`)."""

    id: str
    content: str
    message_type: str
    sender_id: str
    sender_type: str
    chat_room_id: str | None = None
    sender_name: str | None = None
    inserted_at: str | None = None
    updated_at: str | None = None
    attachments: list[Any] | None = None
    metadata: MessageMetadata | None = None


class LifecycleResult(_Body):
    """`/processing`, `/processed` and `/failed` (status exactly 200)."""

    id: str
    status: str
    attempt_number: int
    success: bool


class Participant(_Body):
    id: str
    role: str
    status: str
    type: str
    name: str | None = None
    handle: str | None = None
    online: bool | None = None
    avatar_url: str | None = None


class ContextMeta(_Body):
    """The `metadata` of `/context` and `/messages`: the cursor path's `has_more`,
    `limit` and `next_cursor` (null when no more pages); the deprecated page path's
    `page`, `page_size`, `total_count`, `total_pages`; and, on `/messages`, the
    `status_filter` applied."""

    has_more: bool
    limit: int
    next_cursor: str | None = None
    page: int | None = None
    page_size: int | None = None
    status_filter: str | None = None
    total_count: int | None = None
    total_pages: int | None = None


class MessagePage(_Body):
    """`/context` and `/messages?sort_order=asc`."""

    data: list[ChatMessage]
    metadata: ContextMeta


class ActivityDetail(_Body):
    """What the agent is doing while it works: `kind` (`reasoning`, `tool_call`,
    `memory`, `permission`) and, for a tool call only, the tool's `name`."""

    kind: str
    name: str | None = None


class ActivityReport(_Body):
    """`POST /activity` request and response: `{"working": bool}`; a request may say
    what the agent is doing (`activity`; none means `reasoning`)."""

    working: bool
    activity: ActivityDetail | None = None


class MentionRef(_Body):
    id: str
    handle: str | UnsetType = UNSET


class NewMessage(_Body):
    content: str
    mentions: list[MentionRef]
    attachment_ids: list[str] | UnsetType = UNSET


class NewMessageBody(_Body):
    """`POST /messages` request."""

    message: NewMessage


class Recipient(_Body):
    id: str
    handle: str
    name: str | None = None


class PostedMessage(_Body):
    """`POST /messages` response."""

    id: str
    success: bool
    recipients: list[Recipient]


class FailedMark(_Body):
    """`POST /failed` request: a short label, never a traceback."""

    error: str


class NewEvent(_Body):
    content: str
    message_type: str
    metadata: dict[str, Any] | None = None


class NewEventBody(_Body):
    """`POST /events` request."""

    event: NewEvent


class EventCreated(_Body):
    id: str
    message_type: str
    success: bool


class ErrorBody(_Body):
    code: str
    message: str
    request_id: str | None = None
    details: dict[str, Any] | None = None
    retry_after: int | None = None


class ErrorEnvelope(_Body):
    """Every error response: `{"error": {"code", "message", "request_id", ...}}`."""

    error: ErrorBody
