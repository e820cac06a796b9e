"""An adapter for A2A agents: each message becomes an A2A task, stopped with `CancelTask`.

    adapter = A2AAdapter("http://127.0.0.1:9999/")     # the JSON-RPC endpoint

Each turn sends the message to the peer and posts what it answers: the text
of the task's artifacts (chunks joined as they stream, `append` honoured),
else its final status message. Protocol 1.0 (a2a-sdk 1.x) is spoken, with the
`A2A-Version: 1.0` header; a peer that answers -32601 (method not found) or
-32009 (version not supported) is spoken to in 0.3 from then on.

Streaming (the agent card says `capabilities.streaming`, or it is forced):
`SendStreamingMessage`, whose first event carries the task id. Not streaming:
`SendMessage` with `returnImmediately` (0.3: `blocking: false`), so the task
id is known at once, then `GetTask` every `poll_interval` until the task ends
— a stop before the answer still cancels the task. A stream that ends (or is
lost) before the task did is followed the same way.

How it stops. Closing a stream does not stop an A2A task (a2a-sdk 1.3 runs it
on): the stop is `CancelTask`, the turn's remote stop. The start — the
request and its first event, which reveals the task id — runs in
`work.starting()`, so an interrupt that lands meanwhile lets it finish and
the task is cancelled as soon as its id is known. A task that ended on its
own (a terminal state seen) is never cancelled. The outcomes are in
`_a2a_rpc`: `confirmed` when the peer answers with the task canceled.

What each end means for the message: `COMPLETED` posts the answer;
`FAILED`, `REJECTED` (or a task the peer canceled itself) raise
`A2ATaskError`, so the message is marked failed; `INPUT_REQUIRED` and
`AUTH_REQUIRED` post the agent's question and end the turn, and the room's
next message continues that task (`taskId`), once. A plain message answer
(no task) is posted; there is nothing to cancel.

Per room the A2A `contextId` is kept across turns, so the peer sees one
conversation; `on_room_left` drops it. After an interrupt or stop, the room's
next request says so in `message.metadata.bandTrio.previousAnswer` (kind and
reason): the peer's own history holds the canceled task.

Upstream faults (docs/reference/adapters.md, "Upstream faults"). The turn's
first request — `SendStreamingMessage` up to its first event, or `SendMessage`
— is asked again under `call_upstream`'s rules (408/409/429/5xx/529, no
connection, a connection dropped or silent, a stream that ended before its
first event) only while no task id is known: once the peer named a task, a
second request would start a second one, so a stream lost after that is
followed by `GetTask` instead, and each `GetTask` is retried under the same
rules. A first request that broke before naming its task may have started one
all the same: before any retry it is looked up (`_a2a_lookup`: `ListTasks` by
our `messageId`) and, found, followed or stopped, never started twice.
`CancelTask` is retried only within the stop's own deadline.

One `httpx2.AsyncClient` per turn, closed (shielded, bounded) when the turn
ends, so no socket outlives it. `CancelTask` never queues behind the stream:
the stream holds its connection, so the stop gets another one.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx2
import trio

from .._ranges import read_number, seconds
from ..contract import (
    Adapter,
    RemoteWork,
    Turn,
    UpstreamFault,
    call_upstream,
    request_body,
    upstream_client,
)
from ..errors import ConfigurationError, PeerProtocolError
from ..policy import UpstreamPolicy
from ._a2a_lookup import BROKEN_START, Ask, recover
from ._a2a_rpc import PEER, EventStream, Rpc
from ._a2a_wire import (
    INTERRUPTED,
    METHOD_NOT_FOUND,
    TERMINAL,
    V03,
    V1,
    VERSION_NOT_SUPPORTED,
    A2AError,
    A2AProtocolError,
    A2ARpcError,
    A2ATaskError,
    Answer,
    decode,
    event_of,
)
from ._settings import adapter_upstream

__all__ = ["A2AAdapter", "A2AError", "A2AProtocolError", "A2ARpcError", "A2ATaskError", "a2a"]

log = logging.getLogger("band_trio.adapters.a2a")

T = TypeVar("T")

_REFUSES_1_0 = frozenset({METHOD_NOT_FOUND, VERSION_NOT_SUPPORTED})
CARD_PATH = "/.well-known/agent-card.json"


@dataclass(slots=True)
class _Room:
    context_id: str | None = None
    open_task: str | None = None
    """A task waiting for the user's input: the next message continues it."""
    told_abort: str | None = None
    """The aborted message the peer was last told about."""


class A2AAdapter(Adapter):
    """Answers each message with an A2A task (see the module).

    `streaming`: None reads the agent card. `protocol`: None speaks 1.0 and falls
    back to 0.3 if the peer refuses it; "1.0" or "0.3" speaks only that.
    `poll_interval`: seconds between `GetTask` polls (non-streaming peers, and a
    non-terminal `CancelTask` answer). `headers` go with every request
    (`Authorization`, for instance). `upstream`: this adapter's retries, timeouts and
    read limits, instead of the agent's `Policy.upstream`."""

    def __init__(
        self,
        url: str,
        *,
        streaming: bool | None = None,
        protocol: Literal["1.0", "0.3"] | None = None,
        poll_interval: float = 0.2,
        headers: Mapping[str, str] | None = None,
        upstream: UpstreamPolicy | None = None,
    ) -> None:
        if not re.match(r"^https?://[^/\s]+", url):
            raise ConfigurationError(f"the A2A URL must be http(s)://host[:port]/..., not {url!r}")
        if protocol not in (None, "1.0", "0.3"):
            raise ConfigurationError(f"the A2A protocol is 1.0 or 0.3, not {protocol!r}")
        if not 0 < poll_interval <= 60:
            raise ConfigurationError(f"poll_interval must be in (0, 60] s, not {poll_interval!r}")
        self.url = url
        parts = urlsplit(url)
        self.card_url = urlunsplit((parts.scheme, parts.netloc, CARD_PATH, "", ""))
        self.streaming = streaming
        """Whether the peer is streamed to; None until the agent card was read."""
        self.poll_interval = poll_interval
        self.headers = dict(headers or {})
        self.upstream = upstream
        self.dialect = V03 if protocol == "0.3" else V1
        """The protocol spoken: fixed by `protocol`, or by the first answer of the peer."""
        self._may_fall_back = protocol is None
        self._rooms: dict[str, _Room] = {}

    def context_id(self, room_id: str) -> str | None:
        """The A2A context a room's conversation continues in (None before its first task)."""
        room = self._rooms.get(room_id)
        return room.context_id if room else None

    async def on_room_left(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)

    async def on_turn(self, turn: Turn) -> None:
        room = self._rooms.setdefault(turn.room_id, _Room())
        ask = self._ask(turn, room)
        upstream = self.upstream or turn.upstream
        answer = Answer(limit=upstream.max_answer_chars)
        try:
            async with self._client(upstream) as client:
                rpc = Rpc(
                    client,
                    self.url,
                    self.dialect,
                    poll_interval=self.poll_interval,
                    upstream=upstream,
                    turn=turn,
                )
                streamed = await self._streams(client, upstream)
                one = self._streamed if streamed else self._polled

                async def attempt() -> None:
                    await one(turn, rpc, ask, answer)

                await call_upstream(
                    turn,
                    attempt,
                    peer=PEER,
                    upstream=upstream,
                    error=A2AError,
                    may_retry=lambda: answer.task_id is None,  # a retry would start a 2nd task
                )
        finally:  # the context exists on the peer whatever became of this turn
            room.context_id = answer.context_id or room.context_id
        await turn.reply(_outcome(answer, room))

    # -- one turn -------------------------------------------------------------

    def _ask(self, turn: Turn, room: _Room) -> Ask:
        task_id, room.open_task = room.open_task, None
        metadata: dict[str, Any] | None = None
        abort = turn.last_abort
        if abort is not None and abort.message_id != room.told_abort:
            room.told_abort = abort.message_id
            told = {"aborted": abort.kind, "messageId": abort.message_id, "reason": abort.reason}
            metadata = {"bandTrio": {"previousAnswer": {k: v for k, v in told.items() if v}}}
        return Ask(
            turn.message.content,
            str(uuid.uuid4()),
            context_id=room.context_id,
            task_id=task_id,
            metadata=metadata,
        )

    async def _streamed(self, turn: Turn, rpc: Rpc, ask: Ask, answer: Answer) -> None:
        """One attempt, streamed: a fault before the first event raises `UpstreamFault`."""
        stream: EventStream | None = None
        try:
            async with turn.remote(stop=rpc.cancel, name="a2a task") as work:
                with work.starting():  # until the first event names the task
                    try:
                        stream = await self._start(
                            rpc, lambda: rpc.open_stream(ask.params(rpc.dialect))
                        )
                        first = await stream.next()
                        if first is None:
                            raise stream.fault()
                    except BROKEN_START as error:  # did the peer start a task all the same?
                        await recover(rpc, ask, error, answer, work)
                        first = None
                    if first is not None:
                        answer.add(first)
                        if answer.task_id is not None:
                            work.started(answer.task_id)
                if first is None:  # found after a broken start: followed by GetTask
                    await self._adopted(rpc, answer, work)
                    return
                assert stream is not None
                await self._follow(stream, rpc, answer, work)
        finally:  # after the stop: the stream is closed last (`_a2a_rpc`)
            if stream is not None:
                await stream.aclose()

    async def _follow(
        self, stream: EventStream, rpc: Rpc, answer: Answer, work: RemoteWork[str]
    ) -> None:
        """Read the stream until the task is over; if it ends first, poll the task."""
        while not answer.over:
            try:
                event = await stream.next()
            except A2ARpcError:  # an error frame: if the task ended with it, nothing to stop
                await self._check_ended(rpc, answer, work)
                raise
            if event is None:
                if answer.task_id is None:
                    raise A2AProtocolError("the A2A stream ended before naming a task")
                log.info("the A2A stream ended before task %s did: polling it", answer.task_id)
                await self._poll(rpc, answer)
                break
            answer.add(event)
        work.finished()
        drain = rpc.upstream.drain_grace
        with trio.move_on_after(drain), suppress(A2AError):  # let the peer end it
            while await stream.next() is not None:
                pass

    async def _polled(self, turn: Turn, rpc: Rpc, ask: Ask, answer: Answer) -> None:
        def send() -> Awaitable[dict[str, Any]]:
            params = {**ask.params(rpc.dialect), "configuration": rpc.dialect.non_blocking}
            return rpc.call(rpc.dialect.send, params)

        async with turn.remote(stop=rpc.cancel, name="a2a task") as work:
            found = False
            with work.starting():  # returnImmediately: the answer names the task at once
                try:
                    answer.add(event_of(await self._start(rpc, send)))
                except BROKEN_START as error:  # did the peer start a task all the same?
                    await recover(rpc, ask, error, answer, work)
                    found = True
                if answer.task_id is not None and not found:
                    work.started(answer.task_id)
            if found:
                await self._adopted(rpc, answer, work)
                return
            await self._poll(rpc, answer)
            work.finished()

    async def _adopted(self, rpc: Rpc, answer: Answer, work: RemoteWork[str]) -> None:
        """Follow a task found by `recover` (its listing holds no artifacts: `GetTask`)."""
        assert answer.task_id is not None
        answer.add(await rpc.get(answer.task_id))
        await self._poll(rpc, answer)
        work.finished()

    async def _poll(self, rpc: Rpc, answer: Answer) -> None:
        while not answer.over:
            assert answer.task_id is not None
            await trio.sleep(self.poll_interval)
            answer.add(await rpc.get(answer.task_id))

    async def _check_ended(self, rpc: Rpc, answer: Answer, work: RemoteWork[str]) -> None:
        """After an error frame: a task that ended with it (FAILED) needs no stop."""
        task_id = answer.task_id
        with trio.move_on_after(rpc.upstream.check_grace), suppress(A2AError):
            while task_id is not None and answer.state not in TERMINAL:
                answer.add(await rpc.get(task_id))
                if answer.state not in TERMINAL:
                    await trio.sleep(self.poll_interval)
        if answer.state in TERMINAL:
            work.finished()

    async def _start(self, rpc: Rpc, attempt: Callable[[], Awaitable[T]]) -> T:
        """The turn's first request; a peer that refuses 1.0 is spoken to in 0.3 from now on."""
        try:
            result = await attempt()
        except A2ARpcError as error:
            if not (self._may_fall_back and error.code in _REFUSES_1_0):
                raise
            log.info("%s refused A2A 1.0 (%s): speaking 0.3 from now on", self.url, error)
            self.dialect = rpc.dialect = V03
            result = await attempt()
        self._may_fall_back = False
        return result

    # -- the peer -------------------------------------------------------------

    @asynccontextmanager
    async def _client(self, upstream: UpstreamPolicy) -> AsyncIterator[httpx2.AsyncClient]:
        client = upstream_client(upstream, headers=self.headers)
        try:
            yield client
        finally:
            with trio.move_on_after(upstream.close_grace, shield=True):
                await client.aclose()

    async def _streams(self, client: httpx2.AsyncClient, upstream: UpstreamPolicy) -> bool:
        """Whether to stream: as set, else as the agent card says (read once, bounded by
        `discovery_deadline` and `max_body`)."""
        if self.streaming is None:
            card: object = None
            with trio.move_on_after(upstream.discovery_deadline):
                try:
                    _, body = await request_body(
                        client, "GET", self.card_url, upstream, what="the agent card"
                    )
                    card = decode(body, "the agent card")
                except (httpx2.HTTPError, A2AError, UpstreamFault, PeerProtocolError) as exc:
                    log.info("no agent card at %s (%r): streaming", self.card_url, exc)
            self.streaming = streaming_in_card(card)
        return self.streaming


def streaming_in_card(card: object) -> bool:
    """`capabilities.streaming` of an agent card; True if the card does not say."""
    capabilities = card.get("capabilities") if isinstance(card, dict) else None
    streaming = capabilities.get("streaming") if isinstance(capabilities, dict) else None
    return streaming if isinstance(streaming, bool) else True


def _outcome(answer: Answer, room: _Room) -> str:
    """The text to post, or the error that fails the message."""
    text = answer.text()
    if answer.reply is not None or answer.state == "completed":
        if not text:
            raise A2AError("the A2A agent answered without any text")
        return text
    if answer.state in INTERRUPTED:
        room.open_task = answer.task_id
        return text or f"(the agent is waiting: {answer.state})"
    reason = f": {text}" if text else ""
    raise A2ATaskError(f"the A2A task {answer.task_id} ended {answer.state}{reason}")


# -- configuration --------------------------------------------------------------------

_STREAMING: dict[str, bool | None] = {"auto": None, "yes": True, "no": False}
_PROTOCOLS: dict[str, Literal["1.0", "0.3"] | None] = {"auto": None, "1.0": "1.0", "0.3": "0.3"}


def a2a() -> A2AAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:a2a`).

    `BAND_A2A_URL` (required: the JSON-RPC endpoint, e.g. `http://127.0.0.1:9999/`),
    `BAND_A2A_STREAMING` (`auto`, the default, reads the agent card; `yes`; `no`),
    `BAND_A2A_PROTOCOL` (`1.0` or `0.3` to speak only that; unset or `auto`: 1.0,
    falling back to 0.3), `BAND_A2A_POLL_INTERVAL` (seconds, default 0.2). Retries,
    timeouts and read limits: `BAND_A2A_<FIELD>` for each `UpstreamPolicy` field
    (`BAND_A2A_READ_TIMEOUT`, `BAND_A2A_ATTEMPTS`, …) over `BAND_UPSTREAM_<FIELD>`."""
    env = {k: v.strip() for k, v in os.environ.items() if k.startswith("BAND_A2A_")}
    url = env.get("BAND_A2A_URL")
    if not url:
        raise ConfigurationError("BAND_A2A_URL is not set (e.g. http://127.0.0.1:9999/)")
    streaming = env.get("BAND_A2A_STREAMING") or "auto"
    if streaming.lower() not in _STREAMING:
        raise ConfigurationError(f"BAND_A2A_STREAMING must be auto, yes or no, not {streaming!r}")
    protocol = env.get("BAND_A2A_PROTOCOL") or "auto"
    if protocol not in _PROTOCOLS:
        raise ConfigurationError(f"BAND_A2A_PROTOCOL must be 1.0, 0.3 or auto, not {protocol!r}")
    poll = env.get("BAND_A2A_POLL_INTERVAL") or "0.2"
    interval = read_number("BAND_A2A_POLL_INTERVAL", poll, seconds(60, above=True))
    try:
        return A2AAdapter(
            url,
            streaming=_STREAMING[streaming.lower()],
            protocol=_PROTOCOLS[protocol],
            poll_interval=interval,
            upstream=adapter_upstream("BAND_A2A_"),
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"BAND_A2A_URL: {exc}") from None
