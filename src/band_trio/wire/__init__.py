"""The Band wire protocol, sans-IO: Phoenix V2 frames, event payloads, REST bodies.

Nothing here does I/O or imports trio; the client (`band_trio.link`) and the
embedded platform (`band_trio.platform`) both build on it.
"""

from __future__ import annotations

from . import admin as admin
from ._channels import HEARTBEAT_TOPIC as HEARTBEAT_TOPIC
from ._channels import Channels as Channels
from ._channels import RefCounter as RefCounter
from ._events import EVENT_TYPES as EVENT_TYPES
from ._events import AgentControl as AgentControl
from ._events import Mention as Mention
from ._events import MessageCreated as MessageCreated
from ._events import MessageMetadata as MessageMetadata
from ._events import ParticipantAdded as ParticipantAdded
from ._events import ParticipantRemoved as ParticipantRemoved
from ._events import PayloadError as PayloadError
from ._events import Reply as Reply
from ._events import RoomAdded as RoomAdded
from ._events import RoomDeleted as RoomDeleted
from ._events import RoomRemoved as RoomRemoved
from ._events import Supersede as Supersede
from ._events import decode_payload as decode_payload
from ._frames import Frame as Frame
from ._frames import FrameError as FrameError
from ._frames import decode_frame as decode_frame
from ._frames import encode_frame as encode_frame
from ._frames import payload_or_empty as payload_or_empty
from ._rest import EVENT_CONTENT_CHARS as EVENT_CONTENT_CHARS
from ._rest import EVENT_METADATA_BYTES as EVENT_METADATA_BYTES
from ._rest import MESSAGE_ATTACHMENTS as MESSAGE_ATTACHMENTS
from ._rest import MESSAGE_CONTENT_BYTES as MESSAGE_CONTENT_BYTES
from ._rest import PAGE_LIMIT_MAX as PAGE_LIMIT_MAX
from ._rest import ActivityDetail as ActivityDetail
from ._rest import ActivityReport as ActivityReport
from ._rest import AgentProfile as AgentProfile
from ._rest import ChatMessage as ChatMessage
from ._rest import ContextMeta as ContextMeta
from ._rest import Data as Data
from ._rest import ErrorBody as ErrorBody
from ._rest import ErrorEnvelope as ErrorEnvelope
from ._rest import EventCreated as EventCreated
from ._rest import FailedMark as FailedMark
from ._rest import LifecycleResult as LifecycleResult
from ._rest import MentionRef as MentionRef
from ._rest import MessagePage as MessagePage
from ._rest import NewEvent as NewEvent
from ._rest import NewEventBody as NewEventBody
from ._rest import NewMessage as NewMessage
from ._rest import NewMessageBody as NewMessageBody
from ._rest import PageMeta as PageMeta
from ._rest import Participant as Participant
from ._rest import PostedMessage as PostedMessage
from ._rest import Recipient as Recipient
from ._rest import RoomPage as RoomPage
from ._rest import RoomSummary as RoomSummary
from ._rest import cut_event_content as cut_event_content

__all__ = [
    "EVENT_CONTENT_CHARS",
    "EVENT_METADATA_BYTES",
    "EVENT_TYPES",
    "HEARTBEAT_TOPIC",
    "MESSAGE_ATTACHMENTS",
    "MESSAGE_CONTENT_BYTES",
    "PAGE_LIMIT_MAX",
    "ActivityDetail",
    "ActivityReport",
    "AgentControl",
    "AgentProfile",
    "Channels",
    "ChatMessage",
    "ContextMeta",
    "Data",
    "ErrorBody",
    "ErrorEnvelope",
    "EventCreated",
    "FailedMark",
    "Frame",
    "FrameError",
    "LifecycleResult",
    "Mention",
    "MentionRef",
    "MessageCreated",
    "MessageMetadata",
    "MessagePage",
    "NewEvent",
    "NewEventBody",
    "NewMessage",
    "NewMessageBody",
    "PageMeta",
    "Participant",
    "ParticipantAdded",
    "ParticipantRemoved",
    "PayloadError",
    "PostedMessage",
    "Recipient",
    "RefCounter",
    "Reply",
    "RoomAdded",
    "RoomDeleted",
    "RoomPage",
    "RoomRemoved",
    "RoomSummary",
    "Supersede",
    "admin",
    "cut_event_content",
    "decode_frame",
    "decode_payload",
    "encode_frame",
    "payload_or_empty",
]
