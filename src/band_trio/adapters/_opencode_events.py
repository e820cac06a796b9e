"""OpenCode's event stream (`GET /event`) for one session, and a prompt's run read from it.

Why a task of its own reads the stream. A cancel that lands inside a read of
the response breaks the connection (httpcore closes it), and the turn's stop
needs the stream after the cancel: it waits there for the abort to take
effect. So `subscribe` starts a task that reads the socket — shielded once the
server said `server.connected`, so that only the end of the subscription's
block stops it — and hands the session's events over a memory channel, where a
cancelled receive loses nothing. The channel holds `UpstreamPolicy.event_buffer`
events: a turn that reads slower than OpenCode writes holds the reader back (and
OpenCode with it, through TCP), never more memory than that. OpenCode sends a
`server.heartbeat` every 10 s and many events of other sessions and of its own
(`plugin.added`, `catalog.updated`); only the session's are kept.

What a run looks like (1.18.33, observed): `message.updated` of the user's
message and its part, `session.status` `busy`, `message.updated` of an
assistant message, its `text` part announced by `message.part.updated` (empty),
its pieces in `message.part.delta` (`field: "text"`), the whole text again in
a last `message.part.updated`, `step-finish`, then `session.status` `idle` and
`session.idle`. A failing model call shows as `session.status` `retry`
(`attempt`, `message`, `next`) with backoff, for minutes; an abort as
`session.error` `MessageAbortedError`, then idle.

An event shows its object as it is when the stream writes it, not as it was
when published: OpenCode queues each event for a subscriber by reference,
writes it (`JSON.stringify`) only when the stream gets to it, and updates a
message in place before publishing it again. On a loaded server a quick
run is over before its first events are written, and the assistant message's
first `message.updated` already shows `time.completed`. So the answer's
messages are not told by their state but by OpenCode's ids: an assistant
message names the user message it answers (`parentID`), ids ascend, and the
prompt's user message is written after the subscription began, so it is the
newest one seen; updates of an earlier run that trail in (an aborted run
finishing, a summary) answer an older one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import httpx2
import trio

from ..contract import MAX_ANSWER_CHARS, UpstreamFault, check_status, server_sent_events
from ..errors import PeerProtocolError, UpstreamError
from ..policy import UpstreamPolicy

__all__ = ["Answer", "Event", "Events", "OpenCodeError", "run_ended", "subscribe"]

Event = dict[str, Any]


class OpenCodeError(UpstreamError):
    """OpenCode refused a request, failed the prompt, or its event stream broke."""


class Events:
    """The events of one session, in order, from the turn's `GET /event` subscription."""

    def __init__(self, session: str, buffer: int) -> None:
        self.session = session
        self.send, self._receive = trio.open_memory_channel[Event](buffer)
        self.error = "the server ended it"

    async def next(self) -> Event:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise OpenCodeError(f"OpenCode's event stream ended: {self.error}") from None


@asynccontextmanager
async def subscribe(
    client: httpx2.AsyncClient, session: str, params: dict[str, str], upstream: UpstreamPolicy
) -> AsyncIterator[Events]:
    """`GET /event` read by a task of its own; subscribed (`server.connected`) on entry.

    A failure to subscribe raises the attempt's fault (`UpstreamFault`, or httpx2's
    error) for `call_upstream` to judge; each event is bounded by `max_event`."""
    events = Events(session, upstream.event_buffer)
    reading = trio.CancelScope()  # ours: the pump runs in it, and our block's end ends it
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(_pump, client, events, params, upstream, reading)
            try:
                yield events
            finally:
                reading.cancel()
    except BaseExceptionGroup as group:  # the body's own error: the pump raises none once started
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _pump(
    client: httpx2.AsyncClient,
    events: Events,
    params: dict[str, str],
    upstream: UpstreamPolicy,
    reading: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Read the stream under `reading`, the scope `subscribe` made for it and ends."""
    subscribed = False
    with reading, events.send:
        try:
            async with client.stream("GET", "/event", params=params) as response:
                await check_status(response, upstream)
                if response.status_code != 200:
                    raise OpenCodeError(f"GET /event answered {response.status_code}")
                frames = server_sent_events(response, max_event=upstream.max_event)
                async with aclosing(frames):
                    async for frame in frames:
                        event = json.loads(frame.data)
                        if (event.get("properties") or {}).get("sessionID") == events.session:
                            await events.send.send(event)  # backpressure, not memory
                        elif event.get("type") == "server.connected" and not subscribed:
                            subscribed = True
                            reading.shield = True  # from now on only the block's end stops it
                            task_status.started()
        except (httpx2.HTTPError, UpstreamFault) as exc:
            if not subscribed:
                raise  # the attempt's fault: `call_upstream` judges it
            events.error = f"{type(exc).__name__}: {exc}"[:300]
        except (UpstreamError, ValueError, AttributeError) as exc:
            if not subscribed:
                raise OpenCodeError(f"subscribing to OpenCode's events failed: {exc!r}") from exc
            events.error = f"{type(exc).__name__}: {exc}"[:300]
        if not subscribed:
            raise UpstreamFault.truncated("OpenCode's event stream ended before it was subscribed")


class Answer:
    """The run of one prompt, assembled from its session's events."""

    def __init__(self, max_retries: int, *, limit: int = MAX_ANSWER_CHARS) -> None:
        self.max_retries = max_retries
        self.limit = limit
        """Characters the answer may hold (`UpstreamPolicy.max_answer_chars`)."""
        self.running = False
        """A `busy` status was seen: an `idle` now means this run ended."""
        self.done = False
        self.failure: str | None = None
        self.prompt = ""
        """The newest user message seen before guidance was sent: the prompt's
        (OpenCode's ids ascend)."""
        self.guided = 0
        """Prompts of guidance sent into the run (`Turn.take_guidance`)."""
        self.later: set[str] = set()
        """User messages newer than the prompt, once guided: the guidance's."""
        self.answers: dict[str, str] = {}
        """Each assistant message seen, to the user message it answers (`parentID`)."""
        self.parts: dict[str, tuple[str, list[str]]] = {}
        """Text parts of assistant messages (their message, their text), in the order
        they began."""
        self._size = 0
        """Characters held in `parts`, plus one for each message and part kept
        (bounded by `limit`: a peer naming a new, empty one in every event fills
        memory all the same)."""

    def add(self, event: Event) -> None:
        """Take one event of the session; raises if OpenCode keeps retrying the model."""
        kind = event.get("type")
        props = event.get("properties") or {}
        if kind == "session.status":
            status = props.get("status") or {}
            state = status.get("type")
            self.running = self.running or state == "busy"
            if state == "idle":
                self._idle()
            if state == "retry" and int(status.get("attempt") or 0) > self.max_retries:
                raise OpenCodeError(
                    f"the model failed {status.get('attempt')} times and OpenCode keeps"
                    f" retrying: {status.get('message')}"
                )
        elif kind == "session.idle":
            self._idle()
        elif kind == "session.error":
            error = props.get("error") or {}
            name = error.get("name") or "an error"
            detail = (error.get("data") or {}).get("message")
            if name == "MessageAbortedError":
                name += " (the session was aborted outside this agent)"
            self.failure = f"OpenCode failed the prompt: {name}" + (f": {detail}" if detail else "")
            self.done = True
        elif kind == "message.updated":
            # Not judged by its state: OpenCode writes an event when the stream gets to
            # it, with the message as it is by then (the module's docstring).
            info = props.get("info") or {}
            if info.get("role") == "user":
                key = str(info.get("id") or "")
                if not self.guided:
                    self.prompt = max(self.prompt, key)
                elif key > self.prompt and key not in self.later:
                    self._size += 1
                    self.later.add(key)
            elif info.get("role") == "assistant":
                key = str(info.get("id"))
                self._size += key not in self.answers
                self.answers[key] = str(info.get("parentID") or "")
        elif kind == "message.part.updated":
            part = props.get("part") or {}
            message = str(part.get("messageID"))
            if part.get("type") == "text" and message in self.answers:
                key = str(part.get("id"))
                _, replaced = self.parts.get(key, (message, []))
                text = str(part.get("text") or "")
                self._size += len(text) - sum(map(len, replaced)) + (key not in self.parts)
                self.parts[key] = (message, [text])
        elif kind == "message.part.delta" and props.get("field") == "text":
            chunks = self.parts.get(str(props.get("partID")), ("", None))[1]
            if chunks is not None:
                delta = str(props.get("delta") or "")
                chunks.append(delta)
                self._size += len(delta)
        if self._size > self.limit:
            raise PeerProtocolError(f"OpenCode's answer ran past {self.limit} characters")

    def _idle(self) -> None:
        """The session went idle: the run ended if it was seen running and every prompt
        of guidance sent into it was answered. OpenCode answers a prompt sent while it
        works in the same run, at its next step; one that came as the run ended starts
        another, which is waited for (`running` again)."""
        if not self.running or self.done:
            return
        newest = max(self.later, default=None)
        if len(self.later) < self.guided or (newest and newest not in self.answers.values()):
            self.running = False
            return
        self.done = True

    def text(self) -> str:
        """The text of the messages answering the prompt and the guidance sent after it;
        a previous run's updates that trailed into this turn's events answer an older
        user message."""
        ours = {self.prompt, *self.later}
        texts = (
            "".join(chunks).strip()
            for message, chunks in self.parts.values()
            if self.answers[message] in ours
        )
        return "\n\n".join(text for text in texts if text)


def run_ended(event: Event) -> str | None:
    """What ended the session's run, if `event` says it ended (any error, or idle)."""
    props = event.get("properties") or {}
    kind = event.get("type")
    if kind == "session.error":
        return f"session.error {(props.get('error') or {}).get('name')}"
    if kind == "session.idle" or (
        kind == "session.status" and (props.get("status") or {}).get("type") == "idle"
    ):
        return "session idle"
    return None
