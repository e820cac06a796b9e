"""The agent REST API, `/api/v1/agent/...` (docs/reference/platform.md: every route).

`route()` matches a request before authentication, so an unknown route is a
404 whatever the key; `handle()` then runs the matched route for an
authenticated agent. Statuses follow the SDK's expectations to the letter:
lifecycle marks answer exactly 200, and 204 means "stopped" (or "nothing").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from time import perf_counter

from ..server import HttpError
from ..wire import (
    ActivityReport,
    AgentProfile,
    Data,
    EventCreated,
    FailedMark,
    LifecycleResult,
    NewEventBody,
    NewMessageBody,
    PageMeta,
    Participant,
    PostedMessage,
    Recipient,
    RoomPage,
    RoomSummary,
)
from ._checks import check_activity, check_event, check_message
from ._listing import context, list_messages
from ._payloads import chat_message
from ._platform import Platform
from ._responses import NO_CONTENT, Response, decode_body, json_response
from ._route_args import int_param, member
from ._store import Agent, Delivery, User

__all__ = ["PREFIX", "Route", "describe", "handle", "route"]

PREFIX = ("api", "v1", "agent")
PAGE_LIMIT = 100

Handler = Callable[..., Response]
Route = tuple[Handler, tuple[str, ...]]

_STOPPED = "Agent execution is stopped for this room"


def route(method: str, rest: list[str]) -> Route | None:
    """The handler and path arguments for `rest` (the path after `/api/v1/agent/`)."""
    match method, rest:
        case "GET", ["me"]:
            return _me, ()
        case "GET", ["chats"]:
            return _chats, ()
        case "GET", ["chats", room, "messages", "next"]:
            return _next, (room,)
        case "POST", ["chats", room, "messages", message, ("processing" | "processed" | "failed")]:
            return _mark, (room, message, rest[4])
        case "GET", ["chats", room, "participants"]:
            return _participants, (room,)
        case "GET", ["chats", room, "context"]:
            return context, (room,)
        case "POST", ["chats", room, "activity"]:
            return _activity, (room,)
        case "POST", ["chats", room, "messages"]:
            return _post_message, (room,)
        case "GET", ["chats", room, "messages"]:
            return list_messages, (room,)
        case "POST", ["chats", room, "events"]:
            return _post_event, (room,)
    return None


# Every handler: (platform, agent, query, body, *path_args) -> Response.


def _me(p: Platform, agent: Agent, query: Mapping[str, str], body: bytes) -> Response:
    profile = AgentProfile(
        id=agent.id,
        name=agent.name,
        handle=agent.handle,
        owner_uuid=agent.owner_uuid,
        feature_flags={},
        inserted_at=agent.inserted_at,
        updated_at=agent.inserted_at,
        description=agent.description,
    )
    return json_response(Data(data=profile))


def _chats(p: Platform, agent: Agent, query: Mapping[str, str], body: bytes) -> Response:
    page = int_param(query, "page", 1, 1, 1_000_000)
    size = int_param(query, "page_size", PAGE_LIMIT, 1, PAGE_LIMIT)
    total = p.store.count_rooms_of(agent.id)
    rooms = p.store.rooms_of(agent.id, offset=(page - 1) * size, limit=size)
    summaries = [
        RoomSummary(id=r.id, inserted_at=r.inserted_at, updated_at=r.inserted_at, title=r.title)
        for r in rooms
    ]
    meta = PageMeta(
        page=page,
        page_size=size,
        total_count=total,
        total_pages=max(1, math.ceil(total / size)),
    )
    return json_response(RoomPage(data=summaries, metadata=meta))


def _next(p: Platform, agent: Agent, query: Mapping[str, str], body: bytes, room: str) -> Response:
    member(p, agent, room)
    if p.store.is_stopped(agent.id, room):
        return NO_CONTENT
    pending = p.store.next_pending(agent.id, room)
    if pending is None:
        return NO_CONTENT
    message, delivery = pending
    return json_response(Data(data=chat_message(message, agent.id, delivery)))


def _mark(
    p: Platform,
    agent: Agent,
    query: Mapping[str, str],
    body: bytes,
    room: str,
    message_id: str,
    mark: str,
) -> Response:
    """`/processing` opens (or repeats) an attempt; `/processed` and `/failed` settle it."""
    member(p, agent, room)
    if p.store.is_stopped(agent.id, room):
        return NO_CONTENT
    message = p.store.message(message_id)
    delivery = None if message is None else p.store.delivery(message.seq, agent.id)
    if message is None or message.room_id != room or delivery is None:
        raise HttpError(404, "not_found", f"message {message_id} not found")
    if mark == "failed":  # its `error` is required
        decode_body(body or b"{}", FailedMark)
    if mark == "processing":
        if delivery.status != "processing":
            # A new attempt on the first mark and after ANY terminal status: a claim of
            # a `processed` message re-opens it, and /next serves it again
            # (band-client-rest 0.0.51). Counted, so tests can see a client do it.
            if delivery.status == "processed":
                _reopen(p, agent, room, message_id)
            attempt = delivery.attempts + 1
            delivery = Delivery("processing", attempt, attempt)
    elif delivery.status != "processing":
        raise HttpError(
            422,
            "validation_error",
            "No active processing attempt",
            {"/processing_attempt": ["no active processing attempt"]},
        )
    else:
        delivery = Delivery(mark, delivery.attempts, delivery.current_attempt)
    p.store.set_delivery(message.seq, agent.id, delivery)
    p.changes.notify()
    result = LifecycleResult(
        id=message.id, status=delivery.status, attempt_number=delivery.current_attempt, success=True
    )
    return json_response(Data(data=result))


def _reopen(p: Platform, agent: Agent, room: str, message_id: str) -> None:
    """A claim of a `processed` message: re-opened as documented, unless a test asked
    for `processed` to be terminal (`Faults.keep_processed`)."""
    path = "/".join(("", *PREFIX, "chats", room, "messages", message_id, "processing"))
    if p.faults.processed_terminal:
        p.faults.refused_reopen(agent.id, path)
        raise HttpError(409, "already_processed", f"message {message_id} is processed")
    p.request_log.count("reopened")
    p.request_log.append("note", perf_counter(), agent_id=agent.id, path=path, body="reopened")


def _participants(
    p: Platform, agent: Agent, query: Mapping[str, str], body: bytes, room: str
) -> Response:
    member(p, agent, room)
    live = p.hub.live
    roster: list[Participant] = []
    for position, pid in enumerate(p.store.participants(room)):
        profile = p.store.profile(pid)
        if profile is None:
            continue
        is_agent = isinstance(profile, Agent)
        roster.append(
            Participant(
                id=pid,
                role="owner" if position == 0 else "member",
                status="active",
                type="Agent" if is_agent else "User",
                name=profile.name,
                handle=profile.handle,
                online=pid in live if is_agent else True,
            )
        )
    return json_response(Data(data=roster))


def _activity(
    p: Platform, agent: Agent, query: Mapping[str, str], body: bytes, room: str
) -> Response:
    """Answering `working: false` to a `working: true` tells the client it is stopped."""
    member(p, agent, room)
    report = decode_body(body, ActivityReport)
    check_activity(report.activity)
    working = report.working and not p.store.is_stopped(agent.id, room)
    p.working[(agent.id, room)] = working
    return json_response(Data(data=ActivityReport(working=working)))


def _stopped_gate(p: Platform, agent: Agent, room: str) -> None:
    member(p, agent, room)
    if p.store.is_stopped(agent.id, room):
        raise HttpError(403, "forbidden", _STOPPED)


def _post_message(
    p: Platform, agent: Agent, query: Mapping[str, str], body: bytes, room: str
) -> Response:
    """Recipients are the mentioned participants; deliveries go to the mentioned agents."""
    _stopped_gate(p, agent, room)
    new = decode_body(body, NewMessageBody).message
    check_message(new)
    members = set(p.store.participants(room))
    mentioned: list[Agent | User] = []
    for mention in new.mentions:
        profile = p.store.profile(mention.id) if mention.id in members else None
        if profile is None:
            raise HttpError(
                422, "mentioned_participant_not_in_room", "mentioned_participant_not_in_room"
            )
        if profile.id != agent.id and profile not in mentioned:
            mentioned.append(profile)
    agents = [m.id for m in mentioned if isinstance(m, Agent)]
    message = p.publish(room, agent, new.content, mentioned, agents)
    recipients = [Recipient(id=m.id, handle=m.handle, name=m.name) for m in mentioned]
    posted = PostedMessage(id=message.id, success=True, recipients=recipients)
    return json_response(Data(data=posted), status=201)


def _post_event(
    p: Platform, agent: Agent, query: Mapping[str, str], body: bytes, room: str
) -> Response:
    _stopped_gate(p, agent, room)
    event = decode_body(body, NewEventBody).event
    check_event(event)
    event_id = p.store.add_event(room, agent.id, event.content, event.message_type, event.metadata)
    p.changes.notify()
    created = EventCreated(id=event_id, message_type=event.message_type, success=True)
    return json_response(Data(data=created), status=201)


_NAMES: dict[Handler, str] = {
    _me: "me",
    _chats: "chats",
    _next: "next",
    _participants: "participants",
    context: "context",
    _activity: "activity",
    _post_message: "post_message",
    list_messages: "list_messages",
    _post_event: "post_event",
}


def describe(found: Route) -> tuple[str, str | None, str | None]:
    """The route's stable name (`_faults.REST_ROUTES`), room id and message id."""
    handler, args = found
    if handler is _mark:
        return args[2], args[0], args[1]
    return _NAMES[handler], args[0] if args else None, None


def handle(
    p: Platform, found: Route, agent: Agent, query: Mapping[str, str], body: bytes
) -> Response:
    handler, args = found
    return handler(p, agent, query, body, *args)
