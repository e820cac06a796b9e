"""An adapter for OpenCode servers (`opencode serve`): each message is a prompt in the
room's OpenCode session, stopped with `POST /session/{id}/abort`.

    adapter = OpenCodeAdapter("http://127.0.0.1:4096", provider_id="anthropic",
                              model_id="claude-sonnet-4")

Per room one OpenCode session (`POST /session`, titled after the room), kept
across turns so OpenCode holds the conversation, and forgotten — not deleted:
it stays in OpenCode's history — in `on_room_left`. A turn subscribes to
`GET /event` first, then sends `POST /session/{id}/prompt_async` (`204`: the
prompt was queued) and reads that session's events: the assistant's text parts
(`message.part.updated` carries a part whole, `message.part.delta` its pieces),
until the session goes idle after having been busy; the text is the reply.
`session.error` fails the message, and so does a model OpenCode keeps retrying
(`session.status` `retry`) more than `max_retries` times.

How it stops. Closing the event stream stops nothing in OpenCode; the stop is
`POST /session/{id}/abort`, the turn's remote stop, sent once the prompt was
accepted (the prompt call runs in `work.starting()`). OpenCode answers `200
true` even for an idle or unknown session, so `true` alone is only
`requested`; the stop keeps reading the same event stream, within its own
deadline, for the run's end (`session.error` `MessageAbortedError`, then the
session idle: median 4 ms after the abort's answer, benchmarks/stop_opencode.py) and reports that
as `confirmed`. OpenCode also closes its upstream model stream (stubllm sees
the disconnect), keeps the partial answer in its history (marked aborted) and
drops prompts queued behind it. A run whose stop was not confirmed is checked
(`GET /session/status`) and aborted again before the room's next prompt.

The event stream is read by a task of its own (`_opencode_events`), so the
stop can keep reading it after the turn's cancel.

Mid-run, the turn answers OpenCode's permission requests (`permission.asked`: the
room is asked, by default; `_opencode_permissions`) and passes guidance on as
prompts OpenCode takes at its next step (`_opencode_guidance`).

After an interrupt or stop, the room's next prompt carries a `system` note (OpenCode appends it
to the system prompt for that run) saying the previous answer was interrupted or stopped and
why (`Turn.last_abort`); OpenCode keeps its own transcript valid (tool calls of an aborted run are
closed by OpenCode itself).

Upstream faults (docs/reference/adapters.md, "Upstream faults"). Creating the
session, subscribing to `GET /event` and the prompt are each asked again under
`call_upstream`'s rules (408/409/429/5xx/529, no connection, a connection
dropped or silent) — the prompt only until OpenCode accepted it (`204`): after
that a second one would be a second run, so a broken event stream fails the
turn. The abort is retried only within the stop's own deadline. Every body is
read up to its limit, and the event stream has `UpstreamPolicy.read_timeout`
(OpenCode sends a heartbeat every 10 s).

One `httpx2.AsyncClient` per turn, closed (shielded, bounded) before the reply
is posted, so no socket outlives the turn.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
import trio

from ..contract import (
    Adapter,
    StopAnswer,
    StopOutcome,
    Turn,
    UpstreamFault,
    call_upstream,
    request_body,
    upstream_client,
)
from ..errors import ConfigurationError
from ..policy import UpstreamPolicy
from ._abort_note import abort_note
from ._opencode_events import Answer, Event, Events, OpenCodeError, run_ended, subscribe
from ._opencode_guidance import forwarding
from ._opencode_permissions import answer_permission, check_mode, reject

__all__ = ["OpenCodeAdapter", "OpenCodeError"]

log = logging.getLogger("band_trio.adapters.opencode")

PEER = "OpenCode"
T = TypeVar("T")


@dataclass(slots=True)
class _Room:
    session: str | None = None
    unsettled: bool = False
    """A prompt was sent whose run was not seen to end: check before the next one."""
    cut: str | None = None
    """The message whose turn was aborted, until OpenCode has been told."""
    permission: str | None = None
    """A permission request being answered: refused by a stop, which leaves it pending."""


class OpenCodeAdapter(Adapter):
    """Answers each message with a prompt in the room's OpenCode session (see the module).

    `provider_id`/`model_id` name the model as OpenCode knows it (`opencode models`);
    `password` is the server's `OPENCODE_SERVER_PASSWORD` (basic auth, user `opencode`);
    `directory` is the project directory the sessions work in (default: the server's);
    `max_retries` is how many failed model calls OpenCode may retry before the message
    fails (OpenCode itself retries with backoff for minutes). `permissions`: who answers
    OpenCode's permission requests, `ask` (the room), `deny` or `ignore` (another
    OpenCode client; `_opencode_permissions`). `upstream`: this adapter's retries,
    timeouts and read limits, instead of the agent's `Policy.upstream`."""

    def __init__(
        self,
        base_url: str,
        *,
        provider_id: str,
        model_id: str,
        password: str | None = None,
        directory: str | None = None,
        max_retries: int = 2,
        permissions: str = "ask",
        upstream: UpstreamPolicy | None = None,
    ) -> None:
        if not re.match(r"^https?://[^/\s]+", base_url):
            raise ConfigurationError(
                f"OpenCode URL must be http(s)://host[:port], not {base_url!r}"
            )
        if not provider_id.strip() or not model_id.strip():
            raise ConfigurationError("provider_id and model_id must not be blank")
        if max_retries < 0:
            raise ConfigurationError("max_retries must not be negative")
        self.base_url = base_url.rstrip("/")
        self.model = {"providerID": provider_id, "modelID": model_id}
        self.auth = ("opencode", password) if password else None
        self.params = {"directory": directory} if directory else {}
        self.max_retries = max_retries
        self.permissions = check_mode(permissions)
        self.upstream = upstream
        self._rooms: dict[str, _Room] = {}

    def session(self, room_id: str) -> str | None:
        """The OpenCode session kept for a room, if one was created."""
        room = self._rooms.get(room_id)
        return room.session if room else None

    async def on_room_left(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)

    async def on_turn(self, turn: Turn) -> None:
        room = self._rooms.setdefault(turn.room_id, _Room())
        upstream = self.upstream or turn.upstream
        try:
            async with self._client(upstream) as client, AsyncExitStack() as stack:
                if room.session is None:
                    room.session = await self._retried(
                        turn, upstream, lambda: self._create_session(client, turn.room_id, upstream)
                    )
                session = room.session
                events = await self._retried(
                    turn,
                    upstream,
                    lambda: stack.enter_async_context(
                        subscribe(client, session, self.params, upstream)
                    ),
                )
                if room.unsettled:
                    await self._settle(turn, client, events, upstream)
                text = await self._run(turn, client, events, room, upstream)
                await stack.aclose()  # the subscription ends before the client closes
            await turn.reply(text)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # aborted, not failed
                room.cut = turn.message.id  # told by the next turn, which knows why
            raise

    # -- one turn -------------------------------------------------------------

    async def _retried(
        self, turn: Turn, upstream: UpstreamPolicy, attempt: Callable[[], Awaitable[T]]
    ) -> T:
        """`attempt()` under the retry rules, as OpenCode's call."""
        return await call_upstream(turn, attempt, peer=PEER, upstream=upstream, error=OpenCodeError)

    async def _run(
        self,
        turn: Turn,
        client: httpx2.AsyncClient,
        events: Events,
        room: _Room,
        upstream: UpstreamPolicy,
    ) -> str:
        """Prompt the session and read its events until the run ends; return its text.
        The prompt is asked again under the retry rules until OpenCode accepted it."""

        async def stop(session: str) -> StopAnswer:
            return await self._stop(client, events, room, upstream)

        answer = Answer(self.max_retries, limit=upstream.max_answer_chars)
        body: dict[str, Any] = {
            "model": self.model,
            "parts": [{"type": "text", "text": turn.message.content}],
        }
        note = abort_note(room.cut, turn)
        room.cut = None
        if note:
            body["system"] = note
        accepted = False
        running = trio.Event()

        async def guide(parts: list[dict[str, str]]) -> None:
            await self._prompt(client, room, {"model": self.model, "parts": parts}, upstream)

        async def attempt() -> None:
            nonlocal accepted
            async with turn.remote(stop=stop, name="opencode session") as work:
                with work.starting():
                    room.unsettled = True
                    await self._prompt(client, room, body, upstream)
                    accepted = True
                    work.started(events.session)
                async with forwarding(turn, answer, running, guide):
                    while not answer.done:
                        event = await events.next()
                        if event.get("type") == "permission.asked":
                            await self._permission(turn, client, room, event, upstream)
                        answer.add(event)
                        if answer.running:
                            running.set()
                work.finished()
                room.unsettled = False

        await call_upstream(
            turn,
            attempt,
            peer=PEER,
            upstream=upstream,
            error=OpenCodeError,
            may_retry=lambda: not accepted,  # a second prompt would be a second run
        )
        if answer.failure:
            raise OpenCodeError(answer.failure)
        text = answer.text()
        if not text:
            raise OpenCodeError("OpenCode's answer had no text")
        return text

    async def _permission(
        self,
        turn: Turn,
        client: httpx2.AsyncClient,
        room: _Room,
        event: Event,
        upstream: UpstreamPolicy,
    ) -> None:
        """Answer one of the run's permission requests (the turn waits for the room)."""
        room.permission = str((event.get("properties") or {}).get("id") or "") or None
        await answer_permission(
            turn, client, event, self.permissions, params=self.params, upstream=upstream
        )
        room.permission = None

    async def _stop(
        self, client: httpx2.AsyncClient, events: Events, room: _Room, upstream: UpstreamPolicy
    ) -> StopAnswer:
        """Abort the run; `confirmed` once the session's events show it ended. A
        permission request it was asking about stays pending in OpenCode after the
        abort: it is refused."""
        answered = await self._post_abort(client, events.session, upstream)
        pending, room.permission = room.permission, None
        if pending:
            try:
                await reject(client, pending, params=self.params, upstream=upstream)
            except OpenCodeError as exc:
                log.warning("OpenCode's permission request %s left pending: %s", pending, exc)
        if answered != b"true":
            return StopOutcome.UNCONFIRMED, f"abort answered {answered[:100]!r}"
        detail = "the session did not go idle in time"
        with trio.move_on_at(trio.current_effective_deadline() - upstream.confirm_margin):
            try:
                while not (ended := run_ended(await events.next())):
                    pass
            except OpenCodeError as exc:
                detail = str(exc)
            else:
                room.unsettled = False
                return StopOutcome.CONFIRMED, ended
        return StopOutcome.REQUESTED, f"abort answered true; {detail}"

    async def _settle(
        self, turn: Turn, client: httpx2.AsyncClient, events: Events, upstream: UpstreamPolicy
    ) -> None:
        """End a run that the last stop could not confirm, before the next prompt."""
        status = await self._retried(
            turn, upstream, lambda: self._call(client, "GET", "/session/status", upstream)
        )
        if not isinstance(status, dict) or events.session not in status:
            return  # not busy
        log.info("OpenCode session %s still busy: aborting it again", events.session)
        await self._post_abort(client, events.session, upstream)
        with trio.move_on_after(upstream.resettle_grace):
            while not run_ended(await events.next()):
                pass

    # -- the server -----------------------------------------------------------

    async def _create_session(
        self, client: httpx2.AsyncClient, room_id: str, upstream: UpstreamPolicy
    ) -> str:
        # A title of our own also spares a model call: OpenCode titles untitled sessions.
        title = {"title": f"Band {room_id}"}
        session = await self._call(client, "POST", "/session", upstream, json=title)
        if not isinstance(session, dict) or not isinstance(session.get("id"), str):
            raise OpenCodeError(f"POST /session answered without a session id: {session!r:.200}")
        return str(session["id"])

    async def _prompt(
        self,
        client: httpx2.AsyncClient,
        room: _Room,
        body: dict[str, Any],
        upstream: UpstreamPolicy,
    ) -> None:
        """One prompt (one attempt): `204` is accepted; an error status an `UpstreamFault`."""
        path = f"/session/{room.session}/prompt_async"
        try:
            response, answer = await request_body(
                client, "POST", path, upstream, params=self.params, json=body
            )
        except UpstreamFault as fault:
            if fault.fault.status == 404:
                room.session = None  # gone from OpenCode: the next message starts a new one
            raise
        if response.status_code != 204:
            raise OpenCodeError(f"POST {path} answered {response.status_code}: {answer[:300]!r}")

    async def _post_abort(
        self, client: httpx2.AsyncClient, session: str, upstream: UpstreamPolicy
    ) -> bytes:
        """`POST /session/{id}/abort`, asked again only within the stop's own deadline;
        OpenCode's answer (`true`)."""

        async def attempt() -> bytes:
            path = f"/session/{session}/abort"
            _, body = await request_body(client, "POST", path, upstream, params=self.params)
            return body.strip()

        result: bytes = await call_upstream(
            None, attempt, peer=PEER, upstream=upstream, error=OpenCodeError
        )
        return result

    async def _call(
        self,
        client: httpx2.AsyncClient,
        method: str,
        path: str,
        upstream: UpstreamPolicy,
        **kw: Any,
    ) -> Any:
        """One request (one attempt) and its JSON answer, bounded by `upstream`."""
        _, body = await request_body(client, method, path, upstream, params=self.params, **kw)
        try:
            return json.loads(body)
        except ValueError as exc:
            raise OpenCodeError(f"{method} {path} answered something not JSON: {exc}") from exc

    @asynccontextmanager
    async def _client(self, upstream: UpstreamPolicy) -> AsyncIterator[httpx2.AsyncClient]:
        client = upstream_client(upstream, base_url=self.base_url, auth=self.auth)
        try:
            yield client
        finally:
            with trio.move_on_after(upstream.close_grace, shield=True):
                await client.aclose()
