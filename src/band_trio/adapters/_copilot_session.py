"""One Copilot session's events, as the CLI's reader hands them over, and one run in it.

What a run looks like (CLI 1.0.102, observed): `session.send` answers with the
new user message's id, then `user.message` (that id), `assistant.turn_start`,
`assistant.message_delta`s, `assistant.message` (the whole text, its
`originatingMessageId` the user message), `assistant.turn_end`,
`assistant.idle`, `session.idle`. A tool call adds `tool.execution_start`, for a
guarded tool `permission.requested` (answered with
`session.permissions.handlePendingPermissionRequest`), `permission.completed`,
`tool.execution_complete`, and another round. A failing model call shows as
`assistant.turn_retry` (five times, with backoff, about 15 s), then
`session.error` and idle. After `session.abort`: `abort`, `agent.interrupted`,
`model.call_finished` (`cancelled`), `assistant.turn_end`, and
`session.idle` with `aborted: true`. Events of sub-agents (`agentId` set) are
not the session's answer.

Nothing here waits for I/O: `Session.feed` runs in the reader's task and only
updates state, answers permission requests (queued on the outbox) and wakes
whoever waits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from ..contract import MAX_ANSWER_CHARS
from ._copilot_errors import CopilotGone
from ._permission_desk import PermissionDesk, PermissionRequest, shorten

__all__ = ["Run", "Session"]

log = logging.getLogger("band_trio.adapters.copilot")

Event = dict[str, Any]
Post = Callable[[str, dict[str, Any]], bool]


class Run:
    """One message's run: its answer, its end, and why it failed.

    Fed in the reader's task, which may hand over the run's whole life (its user
    message, the answer, the idle) before the turn has read `session.send`'s answer:
    so what is seen is kept per user message, and judged once `message_id` is known."""

    def __init__(
        self, max_retries: int, max_answer_chars: int = MAX_ANSWER_CHARS, memory: int = 64
    ) -> None:
        self.max_retries = max_retries
        self.max_answer_chars = max_answer_chars
        self.memory = memory
        """User message ids (with their ends and errors) remembered at most
        (`CopilotConfig.seen_messages`): its own is among the first, and a peer that
        sends more cannot grow the run without bound."""
        self.message_id: str | None = None
        """The user message the CLI made of the prompt (`session.send`'s answer)."""
        self._users: list[str] = []
        self._ended: dict[str, bool] = {}  # user message id -> went idle aborted
        self._errors: dict[str, str] = {}  # user message id ("" if none named) -> error
        self._parts: list[tuple[str, str]] = []  # (originating message id, text)
        self._size = 0
        self.retries = 0
        self._failure: str | None = None
        self.guidance: list[str] = []
        """The user messages the CLI made of the guidance passed on to this run (the
        answers of `session.send` with `mode: "immediate"`): the run is theirs too."""
        self.sending = 0
        """Guidance taken and not yet accepted by the CLI: the run is not over meanwhile."""

    @property
    def own(self) -> list[str]:
        """Its user messages: the prompt's, then the guidance's (none before the first
        is known)."""
        return [] if self.message_id is None else [self.message_id, *self.guidance]

    @property
    def takes_guidance(self) -> bool:
        """Room for more guidance: its messages must stay among the `memory` remembered."""
        return len(self.guidance) + self.sending < self.memory // 2

    def guided(self, message_id: str) -> None:
        """The CLI accepted a message of guidance as `message_id` (one of `sending`)."""
        self.sending = max(0, self.sending - 1)
        self.guidance = [*self.guidance, message_id]

    @property
    def started(self) -> bool:
        """The CLI took this run's message up (its `user.message` was seen)."""
        return self.message_id is not None and self.message_id in self._users

    @property
    def ended(self) -> bool:
        """The session went idle after this run's message and after each of its
        guidance's, and none is still being sent: the run is over."""
        own = self.own
        return bool(own) and not self.sending and all(m in self._ended for m in own)

    @property
    def aborted(self) -> bool:
        """It went idle with `aborted: true`."""
        return any(self._ended.get(m, False) for m in self.own)

    @property
    def failure(self) -> str | None:
        if self._failure is not None:
            return self._failure
        errors = (self._errors.get(m) for m in [*self.own, ""])
        error = next((e for e in errors if e is not None), None)
        return None if error is None else f"Copilot failed the message: {error}"

    @property
    def done(self) -> bool:
        return self.ended or self.failure is not None

    def text(self) -> str:
        """The answer: the text of the assistant's messages for its prompt and its
        guidance (the CLI 1.0.102 names the prompt as the origin of both)."""
        own = set(self.own)
        parts = [text for origin, text in self._parts if origin in own]
        return "\n\n".join(part.strip() for part in parts if part.strip())

    def add(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "user.message" and isinstance(data.get("messageId"), str):
            self._users = [*self._users, data["messageId"]][-self.memory :]
        elif kind == "assistant.message":
            self._answer(data)
        elif kind == "assistant.turn_retry":
            self.retries += 1
            if self.retries > self.max_retries and self._failure is None:
                self._failure = (
                    f"the model kept failing ({data.get('reason') or 'error'}): "
                    f"{self.retries} retries, more than the {self.max_retries} allowed"
                )
        elif kind == "session.error":
            origin = data.get("originatingMessageId")
            message = str(data.get("message") or data.get("errorType") or "an error")
            origin = origin if isinstance(origin, str) else ""
            _keep(self._errors, origin, message[:300], self.memory)
        elif kind == "session.idle":
            for user in self._users:  # every message taken up so far has had its run
                _keep(self._ended, user, bool(data.get("aborted")), self.memory)

    def _answer(self, data: dict[str, Any]) -> None:
        content = data.get("content")
        origin = data.get("originatingMessageId")
        if not isinstance(content, str) or not content or not isinstance(origin, str):
            return
        self._size += len(content)
        if self._size > self.max_answer_chars:
            limit = self.max_answer_chars
            self._failure = self._failure or f"the answer passed {limit} characters"
            return
        self._parts.append((origin, content))


def _keep(seen: dict[str, Any], key: str, value: Any, memory: int) -> None:
    """Remember `value` for `key` unless known, forgetting the oldest past `memory`."""
    if key not in seen:
        seen[key] = value
        while len(seen) > memory:
            del seen[next(iter(seen))]


class Session:
    """A Copilot session of one room, on one CLI process; fed by the CLI's reader."""

    def __init__(self, session_id: str, room_id: str, allow: frozenset[str], post: Post) -> None:
        self.id = session_id
        self.room_id = room_id
        self.allow = allow
        self._post = post
        self.run: Run | None = None
        self.busy = False
        """Between a `user.message` and the next `session.idle`: a run is going on."""
        self.idles = 0
        """`session.idle` events so far (a stop waits for the next one)."""
        self.last_idle_aborted = False
        self.denied = 0
        self.granted = 0
        self.asked = 0
        self.desk: PermissionDesk | None = None
        """Where a request the allow-list does not grant waits for the room, while a
        turn of an adapter configured to ask runs."""
        self.gone: str | None = None
        """Why the CLI's connection ended, once it did."""
        self._changed = trio.Event()

    def feed(self, event: Event) -> None:
        """One event of this session (the reader's task: never blocks)."""
        kind = event.get("type")
        data = event.get("data")
        if not isinstance(kind, str) or not isinstance(data, dict):
            return
        if kind == "permission.requested":
            self._permission(data)  # whoever asked, sub-agents included
        if event.get("agentId") or data.get("parentToolCallId"):
            return  # a sub-agent's: not the session's own answer or state
        if kind == "user.message":
            self.busy = True
        elif kind == "session.idle":
            self.busy = False
            self.idles += 1
            self.last_idle_aborted = bool(data.get("aborted"))
        if self.run is not None:
            self.run.add(kind, data)
        self.notify()

    def end(self, reason: str) -> None:
        """The CLI's connection ended: whoever waits is told why."""
        self.gone = reason
        self.notify()

    async def wait(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds; raises `CopilotGone` if the CLI went away.
        The caller sets the deadline."""
        while not predicate():
            if self.gone is not None:
                raise CopilotGone(self.gone)
            await self._changed.wait()

    def notify(self) -> None:
        """Wake whoever waits (`wait`): its run's state changed."""
        self._changed.set()
        self._changed = trio.Event()

    def _permission(self, data: dict[str, Any]) -> None:
        request = data.get("permissionRequest")
        request_id = data.get("requestId")
        if not isinstance(request, dict) or not isinstance(request_id, str):
            return
        if data.get("resolvedByHook"):
            return
        kind = str(request.get("kind", "?"))
        what = _describe(request)
        if kind in self.allow:
            self.granted += 1
            log.info("room %s: granted Copilot's %s request (%s)", self.room_id, kind, what)
            self._answer(request_id, kind, {"kind": "approve-once"})
        elif self.desk is not None:  # the turn asks the room; answered when it has
            self.asked += 1

            def respond(choice: str | None) -> None:
                self._answer(request_id, kind, self._decided(kind, what, choice))

            self.desk.submit(PermissionRequest(question(kind, request), CHOICES, respond))
        else:
            self.denied += 1
            log.info("room %s: denied Copilot's %s request (%s)", self.room_id, kind, what)
            feedback = f"band-trio's operator does not allow {kind} here"
            self._answer(request_id, kind, {"kind": "reject", "feedback": feedback})

    def _decided(self, kind: str, what: str, choice: str | None) -> dict[str, Any]:
        """The answer to a request the room was asked about (None: the turn ended first)."""
        if choice == "allow":
            self.granted += 1
            log.info(
                "room %s: the room granted Copilot's %s request (%s)", self.room_id, kind, what
            )
            return {"kind": "approve-once"}
        self.denied += 1
        if choice is None:
            log.info("room %s: Copilot's %s request ended with the turn", self.room_id, kind)
            return {"kind": "reject", "feedback": "the user stopped this work"}
        log.info("room %s: the room denied Copilot's %s request (%s)", self.room_id, kind, what)
        return {"kind": "reject", "feedback": "the user did not allow it"}

    def _answer(self, request_id: str, kind: str, result: dict[str, Any]) -> None:
        params = {"sessionId": self.id, "requestId": request_id, "result": result}
        if not self._post("session.permissions.handlePendingPermissionRequest", params):
            log.warning("room %s: could not answer Copilot's %s request", self.room_id, kind)


CHOICES = ("allow", "deny")
"""The room's choices for a permission request (`approve-once` or `reject`)."""

ACTIONS = {
    "shell": "run a shell command",
    "write": "write a file",
    "read": "read a file outside its folder",
    "url": "fetch a URL",
    "mcp": "call an MCP tool",
    "memory": "store a memory",
    "custom-tool": "run a custom tool",
    "hook": "run a hook",
}


def question(kind: str, request: dict[str, Any]) -> str:
    """The question put to the room: what Copilot would do, and what it names."""
    action = ACTIONS.get(kind, f"use the permission {kind!r}")
    detail = next(
        (
            f"`{shorten(value)}`"
            for key in ("fullCommandText", "fileName", "path", "url", "toolName")
            if isinstance(value := request.get(key), str) and value.strip()
        ),
        "",
    )
    why = request.get("intention")
    lines = [f"Copilot asks to {action}" + (f": {detail}" if detail else ".")]
    if isinstance(why, str) and why.strip():
        lines.append(f"Why: {shorten(why)}")
    lines.append("allow: let it, this once; deny: refuse it.")
    return "\n".join(lines)


def _describe(request: dict[str, Any]) -> str:
    for key in ("fullCommandText", "fileName", "path", "url", "toolName", "intention"):
        value = request.get(key)
        if isinstance(value, str) and value:
            return " ".join(value.split())[:120]
    return "no detail"
