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

After an interrupt or stop, the room's next prompt carries a `system` note (OpenCode appends it
to the system prompt for that run) saying the previous answer was interrupted or stopped and
why (semantics §9); OpenCode keeps its own transcript valid (tool calls of an aborted run are
closed by OpenCode itself).

One `httpx2.AsyncClient` per turn, closed (shielded, bounded) before the reply
is posted, so no socket outlives the turn.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import trio

from ..contract import Adapter, StopAnswer, StopOutcome, Turn
from ..errors import ConfigurationError
from ._opencode_events import Answer, Events, OpenCodeError, run_ended, subscribe

__all__ = ["OpenCodeAdapter", "OpenCodeError", "opencode"]

log = logging.getLogger("band_trio.adapters.opencode")

_BACKSTOP = httpx2.Timeout(300.0, connect=30.0)
"""httpx2's own timeouts are a backstop only (OpenCode's event stream sends a heartbeat
every 10 s): the turn's deadline and its signals govern."""
_CLOSE_GRACE = 1.0
_CONFIRM_MARGIN = 0.1
"""The stop stops waiting for the run's end this long before its deadline, so that an
abort OpenCode accepted is reported `requested`, not as unanswered."""
_SETTLE_GRACE = 5.0
"""How long the run an unconfirmed stop left behind may take to end, re-aborted."""


@dataclass(slots=True)
class _Room:
    session: str | None = None
    unsettled: bool = False
    """A prompt was sent whose run was not seen to end: check before the next one."""
    cut: str | None = None
    """The message whose turn was aborted, until OpenCode has been told."""


class OpenCodeAdapter(Adapter):
    """Answers each message with a prompt in the room's OpenCode session (see the module).

    `provider_id`/`model_id` name the model as OpenCode knows it (`opencode models`);
    `password` is the server's `OPENCODE_SERVER_PASSWORD` (basic auth, user `opencode`);
    `directory` is the project directory the sessions work in (default: the server's);
    `max_retries` is how many failed model calls OpenCode may retry before the message
    fails (OpenCode itself retries with backoff for minutes)."""

    def __init__(
        self,
        base_url: str,
        *,
        provider_id: str,
        model_id: str,
        password: str | None = None,
        directory: str | None = None,
        max_retries: int = 2,
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
        self._rooms: dict[str, _Room] = {}
        self._tls: ssl.SSLContext | None = None

    def session(self, room_id: str) -> str | None:
        """The OpenCode session kept for a room, if one was created."""
        room = self._rooms.get(room_id)
        return room.session if room else None

    async def on_room_left(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)

    async def on_turn(self, turn: Turn) -> None:
        room = self._rooms.setdefault(turn.room_id, _Room())
        try:
            async with self._client() as client:
                if room.session is None:
                    room.session = await self._create_session(client, turn.room_id)
                async with subscribe(client, room.session, self.params) as events:
                    if room.unsettled:
                        await self._settle(client, events)
                    text = await self._run(turn, client, events, room)
            await turn.reply(text)
        except BaseException as exc:
            if not isinstance(exc, Exception):  # aborted, not failed
                room.cut = turn.message.id  # told by the next turn, which knows why
            raise

    # -- one turn -------------------------------------------------------------

    async def _run(
        self, turn: Turn, client: httpx2.AsyncClient, events: Events, room: _Room
    ) -> str:
        """Prompt the session and read its events until the run ends; return its text."""

        async def stop(session: str) -> StopAnswer:
            return await self._stop(client, events, room)

        answer = Answer(self.max_retries)
        body: dict[str, Any] = {
            "model": self.model,
            "parts": [{"type": "text", "text": turn.message.content}],
        }
        note = _abort_note(room, turn)
        if note:
            body["system"] = note
        async with turn.remote(stop=stop, name="opencode session") as work:
            with work.starting():
                room.unsettled = True
                await self._prompt(client, room, body)
                work.started(events.session)
            while not answer.done:
                answer.add(await events.next())
            work.finished()
            room.unsettled = False
        if answer.failure:
            raise OpenCodeError(answer.failure)
        text = answer.text()
        if not text:
            raise OpenCodeError("OpenCode's answer had no text")
        return text

    async def _stop(self, client: httpx2.AsyncClient, events: Events, room: _Room) -> StopAnswer:
        """Abort the run; `confirmed` once the session's events show it ended."""
        response = await self._post_abort(client, events.session)
        if response.status_code != 200 or response.content.strip() != b"true":
            return StopOutcome.UNCONFIRMED, f"abort answered {response.status_code}"
        detail = "the session did not go idle in time"
        with trio.move_on_at(trio.current_effective_deadline() - _CONFIRM_MARGIN):
            try:
                while not (ended := run_ended(await events.next())):
                    pass
            except OpenCodeError as exc:
                detail = str(exc)
            else:
                room.unsettled = False
                return StopOutcome.CONFIRMED, ended
        return StopOutcome.REQUESTED, f"abort answered true; {detail}"

    async def _settle(self, client: httpx2.AsyncClient, events: Events) -> None:
        """End a run that the last stop could not confirm, before the next prompt."""
        status = await self._call(client, "GET", "/session/status")
        if not isinstance(status, dict) or events.session not in status:
            return  # not busy
        log.info("OpenCode session %s still busy: aborting it again", events.session)
        await self._post_abort(client, events.session)
        with trio.move_on_after(_SETTLE_GRACE):
            while not run_ended(await events.next()):
                pass

    # -- the server -----------------------------------------------------------

    async def _create_session(self, client: httpx2.AsyncClient, room_id: str) -> str:
        # A title of our own also spares a model call: OpenCode titles untitled sessions.
        session = await self._call(client, "POST", "/session", json={"title": f"Band {room_id}"})
        if not isinstance(session, dict) or not isinstance(session.get("id"), str):
            raise OpenCodeError(f"POST /session answered without a session id: {session!r:.200}")
        return str(session["id"])

    async def _prompt(self, client: httpx2.AsyncClient, room: _Room, body: dict[str, Any]) -> None:
        path = f"/session/{room.session}/prompt_async"
        try:
            response = await client.post(path, params=self.params, json=body)
        except httpx2.HTTPError as exc:
            raise OpenCodeError(f"POST {path} failed: {exc!r}") from exc
        if response.status_code == 404:
            room.session = None  # gone from OpenCode: the next message starts a new one
        if response.status_code != 204:
            raise OpenCodeError(
                f"POST {path} answered {response.status_code}: {response.text:.300}"
            )

    async def _post_abort(self, client: httpx2.AsyncClient, session: str) -> httpx2.Response:
        return await client.post(f"/session/{session}/abort", params=self.params)

    async def _call(self, client: httpx2.AsyncClient, method: str, path: str, **kw: Any) -> Any:
        try:
            response = await client.request(method, path, params=self.params, **kw)
            response.raise_for_status()
            return response.json()
        except (httpx2.HTTPError, ValueError) as exc:
            raise OpenCodeError(f"{method} {path} failed: {exc!r:.300}") from exc

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[httpx2.AsyncClient]:
        if self._tls is None:
            self._tls = httpx2.create_ssl_context()
        client = httpx2.AsyncClient(
            base_url=self.base_url, auth=self.auth, timeout=_BACKSTOP, verify=self._tls
        )
        try:
            yield client
        finally:
            with trio.move_on_after(_CLOSE_GRACE, shield=True):
                await client.aclose()


def _abort_note(room: _Room, turn: Turn) -> str | None:
    """If this room's last turn was aborted, what to tell the model about it (once)."""
    cut, room.cut = room.cut, None
    if cut is None:
        return None
    abort = turn.last_abort
    if abort is not None and abort.message_id == cut:
        verb = "interrupted" if abort.kind == "interrupt" else "stopped"
        why = " ".join((abort.reason or "").split())
        note = f"Your previous answer was {verb} by the user" + (f" (reason: {why})" if why else "")
    else:  # not a signal the runtime told us about: a turn deadline, a shutdown
        note = "Your previous answer was cut off"
    note += " before it was posted, so nobody saw it."
    if cut == turn.message.id:
        note += " The room has resumed: answer the message again."
    return note


# -- configuration --------------------------------------------------------------------


def opencode() -> OpenCodeAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:opencode`).

    `BAND_OPENCODE_URL` (required, e.g. `http://127.0.0.1:4096`), `BAND_OPENCODE_MODEL`
    (required, `provider/model` as OpenCode names it, e.g. `anthropic/claude-sonnet-4`),
    `BAND_OPENCODE_PASSWORD` (the server's basic-auth password, if it has one) and
    `BAND_OPENCODE_DIRECTORY` (the sessions' project directory; default the server's)."""
    env = {k: v.strip() for k, v in os.environ.items() if k.startswith("BAND_OPENCODE_")}
    url = env.get("BAND_OPENCODE_URL")
    if not url:
        raise ConfigurationError("BAND_OPENCODE_URL is not set (e.g. http://127.0.0.1:4096)")
    model = env.get("BAND_OPENCODE_MODEL") or ""
    provider_id, _, model_id = model.partition("/")
    if not provider_id or not model_id:
        raise ConfigurationError(
            f"BAND_OPENCODE_MODEL must be provider/model (e.g. anthropic/claude-sonnet-4),"
            f" not {model!r}"
        )
    try:
        return OpenCodeAdapter(
            url,
            provider_id=provider_id,
            model_id=model_id,
            password=os.environ.get("BAND_OPENCODE_PASSWORD") or None,
            directory=env.get("BAND_OPENCODE_DIRECTORY") or None,
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"BAND_OPENCODE_URL: {exc}") from None
