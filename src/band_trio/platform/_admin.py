"""The admin API under `/_admin` (no auth): the HTTP face of `Platform`'s methods.

It exists for drivers in another process (the CLI, the band-sdk benchmark
peer). Bodies are the Structs of `wire.admin`. `LookupError` from the
platform answers 404, `ValueError` 422.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import msgspec

from ..server import HttpError
from ..wire.admin import (
    AdminAgent,
    AdminControl,
    AdminDelivery,
    AdminLogEntry,
    AdminNewMessage,
    AdminParticipant,
    AdminRoom,
    AdminUser,
    ControlAccepted,
    Created,
    FaultClose,
    FaultDrop,
    FaultHeartbeats,
    FaultHold,
    FaultHoldState,
    FaultJoins,
    FaultProcessed,
    FaultRelease,
    FaultRest,
    FaultResult,
    FaultSupersede,
    FaultUpgrades,
)
from ._platform import Platform
from ._responses import Response, decode_body, json_response

__all__ = ["AdminRoute", "admin_route", "handle_admin"]

Handler = Callable[..., Response]
AdminRoute = tuple[Handler, tuple[str, ...]]


class LogPage(msgspec.Struct, gc=False):
    """`GET /_admin/log?since=N`: entries from N on, and where to continue."""

    entries: list[AdminLogEntry]
    next: int


def admin_route(method: str, rest: list[str]) -> AdminRoute | None:
    """The handler for `rest` (the path after `/_admin/`), or None."""
    match method, rest:
        case "POST", ["agents"]:
            return _create_agent, ()
        case "POST", ["users"]:
            return _create_user, ()
        case "POST", ["rooms"]:
            return _create_room, ()
        case "GET", ["rooms", room]:
            return _get_room, (room,)
        case "DELETE", ["rooms", room]:
            return _delete_room, (room,)
        case "POST", ["rooms", room, "participants"]:
            return _add_participant, (room,)
        case "DELETE", ["rooms", room, "participants", pid]:
            return _remove_participant, (room, pid)
        case "POST", ["rooms", room, "messages"]:
            return _post_message, (room,)
        case "GET", ["rooms", room, "messages"]:
            return _messages, (room,)
        case "GET", ["messages", message]:
            return _delivery, (message,)
        case "POST", ["control"]:
            return _control, ()
        case "GET", ["log"]:
            return _log, ()
        case "GET", ["stats"]:
            return _stats, ()
        case "GET", ["info"]:
            return _info, ()
        case "POST", ["faults", kind] if kind in _FAULTS:
            return _FAULTS[kind], ()
        case "GET", ["faults", "holds"]:
            return _fault_holds, ()
    return None


def handle_admin(p: Platform, found: AdminRoute, query: Mapping[str, str], body: bytes) -> Response:
    handler, args = found
    try:
        return handler(p, query, body, *args)
    except LookupError as exc:
        raise HttpError(404, "not_found", str(exc)) from None
    except ValueError as exc:
        raise HttpError(422, "validation_error", str(exc)) from None


def _create_agent(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body or b"{}", AdminAgent)
    agent = p.create_agent(
        id=req.id,
        name=req.name,
        handle=req.handle,
        description=req.description,
        api_key=req.api_key,
    )
    return json_response(agent, 201)


def _create_user(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body or b"{}", AdminUser)
    return json_response(p.create_user(id=req.id, name=req.name, handle=req.handle), 201)


def _create_room(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body or b"{}", AdminRoom)
    return json_response(p.create_room(req.title, req.participants, id=req.id), 201)


def _room(p: Platform, room_id: str) -> AdminRoom:
    room = p.store.room(room_id)
    if room is None:
        raise LookupError(f"no room {room_id}")
    return AdminRoom(id=room.id, title=room.title, participants=p.store.participants(room_id))


def _get_room(p: Platform, query: Mapping[str, str], body: bytes, room: str) -> Response:
    return json_response(_room(p, room))


def _delete_room(p: Platform, query: Mapping[str, str], body: bytes, room: str) -> Response:
    p.delete_room(room)
    return json_response(Created(id=room))


def _add_participant(p: Platform, query: Mapping[str, str], body: bytes, room: str) -> Response:
    req = decode_body(body, AdminParticipant)
    p.add_participant(room, req.id)
    return json_response(_room(p, room))


def _remove_participant(
    p: Platform, query: Mapping[str, str], body: bytes, room: str, pid: str
) -> Response:
    p.remove_participant(room, pid)
    return json_response(_room(p, room))


def _post_message(p: Platform, query: Mapping[str, str], body: bytes, room: str) -> Response:
    req = decode_body(body, AdminNewMessage)
    message_id = p.post_message(room, req.sender_id, req.content, req.mentions)
    return json_response(Created(id=message_id), 201)


def _messages(p: Platform, query: Mapping[str, str], body: bytes, room: str) -> Response:
    _room(p, room)
    return json_response(p.messages(room))


def _delivery(p: Platform, query: Mapping[str, str], body: bytes, message: str) -> Response:
    delivery = p.delivery(message)
    found = p.store.message(message)
    assert found is not None
    return json_response(AdminDelivery(id=message, room_id=found.room_id, delivery=delivery))


def _control(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, AdminControl)
    correlation_id = p.send_control(
        req.agent_id, req.mode, room_id=req.room_id, scope=req.scope, reason=req.reason
    )
    connected = req.agent_id in p.connected_agents()
    return json_response(ControlAccepted(correlation_id=correlation_id, connected=connected))


def _log(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    try:
        since = int(query.get("since", "0"))
    except ValueError:
        raise HttpError(400, "bad_request", "since must be an integer") from None
    entries = p.log(since)
    return json_response(LogPage(entries=entries, next=p.request_log.next_seq))


def _stats(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    return json_response(p.stats)


def _info(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    return json_response(p.info)


# -- fault injection ----------------------------------------------------------


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _fault_rest(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultRest)
    filters = {"room_id": req.room_id, "message_id": req.message_id, "agent_id": req.agent_id}
    if (req.status is not None) + (req.delay is not None) + req.drop != 1:
        raise ValueError("give exactly one of status (fail), delay (seconds) and drop (true)")
    if req.drop:
        p.faults.drop_rest(req.route, count=req.count, **filters)
    elif req.delay is not None:
        p.faults.delay_rest(req.route, req.delay, count=req.count, **filters)
    else:
        assert req.status is not None
        p.faults.fail_rest(
            req.route, req.status, count=req.count, body=_bytes(req.body),
            retry_after=req.retry_after, **filters,
        )  # fmt: skip
    return json_response(FaultResult(ok=True))


def _fault_drop(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultDrop)
    return json_response(FaultResult(ok=p.faults.drop_socket(req.agent_id)))


def _fault_close(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultClose)
    return json_response(FaultResult(ok=p.faults.close_socket(req.agent_id, req.code, req.reason)))


def _fault_upgrades(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultUpgrades)
    p.faults.refuse_upgrades(
        req.count, req.status, body=_bytes(req.body), retry_after=req.retry_after
    )
    return json_response(FaultResult(ok=True))


def _fault_heartbeats(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body or b"{}", FaultHeartbeats)
    p.faults.mute_heartbeats(req.agent_id, req.muted)
    return json_response(FaultResult(ok=True))


def _fault_supersede(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultSupersede)
    correlation_id = p.faults.supersede(
        req.agent_id, retryable=req.retryable, reason=req.reason, message=req.message,
        retry_after=req.retry_after,
    )  # fmt: skip
    return json_response(FaultResult(ok=True, correlation_id=correlation_id))


def _fault_joins(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultJoins)
    if req.clear:
        p.faults.allow_joins(req.topic)
    elif req.topic is None:
        raise ValueError("topic is required (or clear: true)")
    else:
        p.faults.refuse_joins(req.topic, count=req.count, reason=req.reason)
    return json_response(FaultResult(ok=True))


def _fault_processed(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body or b"{}", FaultProcessed)
    p.faults.keep_processed(req.terminal)
    return json_response(FaultResult(ok=True))


def _fault_hold(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultHold)
    hold = p.faults.hold_rest(
        req.route, count=req.count, room_id=req.room_id, message_id=req.message_id,
        agent_id=req.agent_id,
    )  # fmt: skip
    return json_response(FaultResult(ok=True, hold_id=hold.id))


def _fault_release(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    req = decode_body(body, FaultRelease)
    p.faults.hold(req.hold_id).release()
    return json_response(FaultResult(ok=True, hold_id=req.hold_id))


def _fault_holds(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    return json_response(
        [
            FaultHoldState(hold_id=h.id, route=h.route, held=h.held, released=h.released)
            for h in p.faults.holds
        ]
    )


def _fault_clear(p: Platform, query: Mapping[str, str], body: bytes) -> Response:
    p.faults.clear()
    return json_response(FaultResult(ok=True))


_FAULTS: dict[str, Handler] = {
    "rest": _fault_rest,
    "drop": _fault_drop,
    "close": _fault_close,
    "upgrades": _fault_upgrades,
    "heartbeats": _fault_heartbeats,
    "supersede": _fault_supersede,
    "joins": _fault_joins,
    "processed": _fault_processed,
    "hold": _fault_hold,
    "release": _fault_release,
    "clear": _fault_clear,
}
