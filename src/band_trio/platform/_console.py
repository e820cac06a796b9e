"""The browser console under `/_console/`: a page, its live state stream and its actions.

`band-trio platform --console` serves it from the platform's own hypercorn
app, on loopback and without a key, like `/_admin`. The page is four static
files shipped in the package (`console/`): no build step, no CDN.

* `GET /_console/api/stream?room=ID` is a server-sent event stream: one
  `state` event with the whole state (`_console_state.snapshot`) at once and
  again after every change, coalesced to at most one per
  `console_push_interval`. Nothing is polled: one task (`_console_stream.Feeds`)
  sleeps on the platform's change signal and builds each watched room's state
  once, for all of its streams; at most `console_streams` are open. The page's
  `EventSource` reconnects by itself (`retry:` is `console_reconnect`), so after
  a platform restart on the same port and `--db` it is whole again with the
  first event.
* `POST /_console/api/messages | answers | rooms | rooms/{id}/participants |
  control` are the page's actions, each answering JSON or the platform's error
  envelope with a message meant for a person. An answer (a question card's
  button) is posted as a person on Band types it, `@agent-handle choice`
  mentioning the agent, once the platform has checked that the question is
  still open and that the console's user may answer it: a page showing an old
  state cannot answer twice.

Console requests are not written to the request log: the log is the wire's
record (what agents did), which the console's latency figures are read from.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any, Literal

import msgspec
import trio

from ..server import BodyTooLarge, ClientGone, HttpError, answer, read_body
from ._checks import REASON_CHARS, TITLE_CHARS
from ._console_presses import PressBook
from ._console_questions import Asked, QuestionState, StopMemory
from ._console_state import console_user, room_questions, snapshot
from ._console_stream import Feeds, serve_stream
from ._handles import handle_key
from ._log import logger
from ._platform import Platform
from ._responses import error_body
from ._store import Agent

__all__ = ["PREFIX", "Console"]

PREFIX = "/_console"

_STATIC = {
    "": ("index.html", b"text/html; charset=utf-8"),
    "console.js": ("console.js", b"text/javascript; charset=utf-8"),
    "questions.js": ("questions.js", b"text/javascript; charset=utf-8"),
    "console.css": ("console.css", b"text/css; charset=utf-8"),
    "favicon.svg": ("favicon.svg", b"image/svg+xml"),
}
_MENTION = re.compile(r"(?<![\w@])@([\w.-]+)")
_encode = msgspec.json.Encoder().encode
_NO_STORE = (b"cache-control", b"no-store")


class _NewMessage(msgspec.Struct, forbid_unknown_fields=True):
    room_id: str
    content: str


class _Answer(msgspec.Struct, forbid_unknown_fields=True):
    room_id: str
    question: str
    """The question's id (`q-…`)."""
    choice: str


class _NewRoom(msgspec.Struct, forbid_unknown_fields=True):
    title: str = ""
    agents: list[str] = []


class _NewParticipant(msgspec.Struct, forbid_unknown_fields=True):
    id: str


class _Press(msgspec.Struct, forbid_unknown_fields=True):
    mode: Literal["interrupt", "stop", "play"]
    agent_id: str
    room_id: str | None = None
    reason: str | None = None


def _decode(body: bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(body or b"{}", type=kind)
    except msgspec.ValidationError as exc:
        raise HttpError(422, "validation_error", f"That request is not valid: {exc}.") from None
    except (msgspec.DecodeError, RecursionError):
        raise HttpError(400, "bad_request", "That request is not JSON.") from None


class Console:
    """The console's routes; one per platform server, closed when the server shuts down."""

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        policy = platform.policy
        self.presses = PressBook(
            platform.request_log, keep=policy.console_presses, window=policy.console_press_window
        )
        self._closing = trio.Event()
        self._requests = 0
        self.user_id = ""
        """Who the page posts as, settled once by `run` (the seeded user, or one made
        for the console), so that reading the state never writes to the store."""
        self.stops = StopMemory()
        """Questions withdrawn by a stop, which the room does not record (`StopMemory`)."""
        self.feeds = Feeds(platform.changes, self.presses, policy, self._state)
        """The watched rooms' states, shared by their streams (`_console_stream`)."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Beside the server once it listens (the seeded ids are known): settle the
        console's user, then build the streams' states until `close`."""
        self.user_id = console_user(self.platform)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.feeds.run)
            task_status.started()
            await self._closing.wait()
            nursery.cancel_scope.cancel(reason="the platform is shutting down")

    def close(self) -> None:
        """End every open stream (the server is shutting down); pages will reconnect."""
        self._closing.set()

    # -- HTTP -------------------------------------------------------------------

    async def serve(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path: str = scope["path"][len(PREFIX) :].strip("/")
        method: str = scope["method"]
        self._requests += 1
        request_id = f"console-{self._requests}"
        try:
            if method == "GET" and path in _STATIC:
                await _static(send, *_STATIC[path])
                return
            if method == "GET" and path == "api/stream":
                policy = self.platform.policy
                await serve_stream(
                    self.feeds, policy, self._closing, request_id, scope, receive, send
                )
                return
            limit = self.platform.policy.max_request_body
            try:
                body = await read_body(scope, receive, limit)
            except BodyTooLarge:
                raise HttpError(
                    413, "payload_too_large", f"That request is over {limit} bytes."
                ) from None
            status, value = self._act(method, path.split("/"), body)
            await _json(send, status, _encode(value))
        except HttpError as exc:
            await _json(send, exc.status, error_body(exc.code, exc.message, request_id))
        except ClientGone:
            return
        except Exception:
            logger.exception("console %s %s failed", method, path)
            message = "The platform failed on this request; its log has the details."
            await _json(send, 500, error_body("internal_error", message, request_id))

    def _act(self, method: str, parts: list[str], body: bytes) -> tuple[int, Any]:
        match method, parts:
            case "POST", ["api", "messages"]:
                return 201, self._post(_decode(body, _NewMessage))
            case "POST", ["api", "answers"]:
                return 201, self._answer(_decode(body, _Answer))
            case "POST", ["api", "rooms"]:
                return 201, self._create_room(_decode(body, _NewRoom))
            case "POST", ["api", "rooms", room_id, "participants"]:
                return 200, self._add(room_id, _decode(body, _NewParticipant))
            case "POST", ["api", "control"]:
                return 202, self._press(_decode(body, _Press))
        raise HttpError(404, "not_found", f"The console has no {method} /{'/'.join(parts)}.")

    # -- actions ------------------------------------------------------------------

    def _room(self, room_id: str) -> None:
        if self.platform.store.room(room_id) is None:
            raise HttpError(404, "not_found", f"There is no room {room_id}.")

    def _post(self, req: _NewMessage) -> dict[str, Any]:
        p = self.platform
        content = req.content.strip()
        if not content:
            raise HttpError(422, "empty_message", "Write something first: the message is empty.")
        self._room(req.room_id)
        user = self.user_id
        members: dict[str, str] = {}
        for pid in p.store.participants(req.room_id):
            profile = p.store.profile(pid)
            if profile is not None:  # the key the store keeps handles unique by
                members.setdefault(handle_key(profile.handle), pid)
        mentioned = (handle_key(h) for h in _MENTION.findall(content))
        named = [members[key] for key in mentioned if key in members]
        mentions = [pid for pid in dict.fromkeys(named) if pid != user]
        return self._post_as_user(req.room_id, content, mentions)

    def _post_as_user(self, room_id: str, content: str, mentions: list[str]) -> dict[str, Any]:
        p, user = self.platform, self.user_id
        if not p.store.is_participant(room_id, user):
            p.add_participant(room_id, user)
        message_id = p.post_message(room_id, user, content, mentions or None)
        return {"id": message_id, "mentions": mentions, "content": content}

    def _answer(self, req: _Answer) -> dict[str, Any]:
        p = self.platform
        self._room(req.room_id)
        asked = self._question(req.room_id, req.question)
        if asked.state is not QuestionState.OPEN:
            said = {
                QuestionState.ANSWERED: f'already answered ("{asked.choice}")',
                QuestionState.WITHDRAWN: f"withdrawn ({(asked.reason or 'no reason given')[:200]})",
                QuestionState.SUPERSEDED: "superseded by a newer question of the agent",
            }[asked.state]
            raise HttpError(
                409, "question_closed", f"Question {asked.qid} is {said}: nothing was sent."
            )
        choice = next((c for c in asked.choices if c.casefold() == req.choice.casefold()), None)
        if choice is None:
            raise HttpError(
                422,
                "not_a_choice",
                f"That is not one of the question's choices ({', '.join(asked.choices)}).",
            )
        if not asked.may_answer(self.user_id, "User"):
            raise HttpError(
                403,
                "not_an_answerer",
                f"Question {asked.qid} is for the people it mentions, and the console's "
                "user is not one of them: nothing was sent.",
            )
        agent = p.store.profile(asked.agent_id)
        if agent is None or not p.store.is_participant(req.room_id, asked.agent_id):
            raise HttpError(
                409, "question_closed", "The agent that asked is no longer in this room."
            )
        return self._post_as_user(req.room_id, f"@{agent.handle} {choice}", [asked.agent_id])

    def _question(self, room_id: str, qid: str) -> Asked:
        """The question `qid` among the room's messages the console shows."""
        p = self.platform
        messages, _ = p.store.recent_messages(room_id, p.policy.console_messages)
        deliveries = p.store.deliveries_from(room_id, messages[0].seq) if messages else {}
        asked = room_questions(p, room_id, messages, deliveries, self.stops).values()
        found = [a for a in asked if a.qid == qid]
        if not found:
            raise HttpError(
                404, "not_found", f"This room shows no question {qid[:40]}: nothing was sent."
            )
        return found[-1]

    def _create_room(self, req: _NewRoom) -> dict[str, Any]:
        p = self.platform
        for agent_id in req.agents:
            if agent_id not in p.store.agents:
                raise HttpError(404, "not_found", f"There is no agent {agent_id}.")
        title = req.title.strip() or None
        if title is not None and len(title) > TITLE_CHARS:
            raise HttpError(
                422, "validation_error", f"A room title is at most {TITLE_CHARS} characters."
            )
        room = p.create_room(title, [self.user_id, *req.agents])
        return {"id": room.id, "title": room.title}

    def _add(self, room_id: str, req: _NewParticipant) -> dict[str, Any]:
        p = self.platform
        self._room(room_id)
        if not isinstance(p.store.profile(req.id), Agent):
            raise HttpError(404, "not_found", f"There is no agent {req.id}.")
        p.add_participant(room_id, req.id)
        return {"id": room_id, "participants": p.store.participants(room_id)}

    def _press(self, req: _Press) -> dict[str, Any]:
        p = self.platform
        if req.agent_id not in p.store.agents:
            raise HttpError(404, "not_found", f"There is no agent {req.agent_id}.")
        if req.room_id is not None:
            self._room(req.room_id)
        if req.reason is not None and len(req.reason) > REASON_CHARS:
            raise HttpError(
                422, "validation_error", f"A reason is at most {REASON_CHARS} characters."
            )
        working = any(
            on and agent == req.agent_id and req.room_id in (None, room)
            for (agent, room), on in p.working.items()
        )
        delivered = req.agent_id in p.hub.live
        reason = req.reason or f"{req.mode} pressed in the console"
        correlation_id = p.send_control(req.agent_id, req.mode, room_id=req.room_id, reason=reason)
        press = self.presses.add(
            req.mode,
            req.agent_id,
            req.room_id,
            delivered=delivered,
            was_working=working,
            correlation_id=correlation_id,
        )  # no notify of its own: `send_control` woke the streams, which run after this
        return {"press": press.id, "correlation_id": correlation_id}

    # -- the live stream ------------------------------------------------------------

    def _state(self, room_id: str | None) -> bytes:
        views = self.presses.views()
        return _encode(snapshot(self.platform, self.user_id, room_id, views, self.stops))


async def _json(send: Any, status: int, body: bytes) -> None:
    headers = [_NO_STORE]
    if status == 413:  # the unread rest of the body must not be parsed as a request
        headers.append((b"connection", b"close"))
    await answer(send, status, body, headers)


async def _static(send: Any, name: str, content_type: bytes) -> None:
    body = resources.files(__package__).joinpath("console", name).read_bytes()
    headers = (
        _NO_STORE,
        (
            b"content-security-policy",
            b"default-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'",
        ),
    )
    await answer(send, 200, body, headers, content_type=content_type)
