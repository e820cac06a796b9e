"""An adapter for Anthropic's Messages API on the official `anthropic` SDK, streamed, with tools.

    adapter = AnthropicAdapter("https://api.anthropic.com", "claude-sonnet-4-6", tools=[weather])

Each turn sends the room's conversation with `client.messages.stream(...)`, the
SDK's stream helper, and follows its events; tool calls (`tool_use` blocks) the
model asks for are run in order, their `tool_result`s sent back, and the model
asked again (at most `max_rounds` requests per turn); the final text is the reply.
Guidance (a `WhileBusy.STEER` room) is taken after each round's tool results, as the
OpenAI chat adapter takes it: text after the `tool_result` blocks of the same user
message.

No bridge. The SDK is written on anyio, so it runs under trio as it is: its
HTTP client (httpx2) does its I/O on trio, and the turn's cancel is its cancel.
An interrupt or stop cancels the turn's scope where the helper awaits the next
event; leaving the helper's block closes the response, so the model server
sees the connection close and stops generating (a uvicorn/Starlette server
cancels its generator). The stream is registered as the turn's remote work
(`turn.remote`, `closes_on_cancel`): the close is its recorded stop
(`requested`), sent shielded within `Policy.backend_stop_grace` even if the
cancel cut the SDK's own close short.

What the room's history keeps after an abort is what the OpenAI chat adapter
keeps, in this API's shape: the user's message, every complete answer, the
results of the tools that finished, and — for an answer cut off mid-stream —
the `tool_use` blocks the stream had closed, but not its partial text (nobody
saw it). The next turn closes every `tool_use` left without a `tool_result`
(`"not run: the turn was interrupted by the user (reason: …)"`) and tells the
model, in its new user message, that its previous answer was interrupted or
stopped and why (`Turn.last_abort`). A turn that fails is rolled back.

Upstream faults. The SDK's own retries are off (`max_retries=0`): each request
goes through `call_upstream`, so a 408/409/429/5xx/529, no connection, a
connection dropped or silent for `UpstreamPolicy.read_timeout`, an
`overloaded_error` mid-stream and a stream that ended before `message_stop` are
asked again under band-trio's rules (Retry-After honoured, backoff with full
jitter, attempts capped, never after a post or an abort); a 400 or an event
that cannot be read fails the turn at once, with the reason. The answer is
bounded by `max_answer_chars`; the SDK reads each event and an error answer
whole (`max_event` and `max_error_body` do not apply here).

The SDK client and its HTTP client live for one turn (closed shielded on the
way out), as the OpenAI adapter's client does: an adapter has no hook at the
agent's end, and a client per turn leaves no socket open once the agent stops.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from typing import Any

import httpx2
import trio

from .._ranges import count, read_number
from ..contract import (
    Adapter,
    StopAnswer,
    StopOutcome,
    Turn,
    UpstreamFault,
    call_upstream,
    not_run_note,
    upstream_client,
    upstream_timeout,
)
from ..errors import ConfigurationError
from ..policy import UpstreamPolicy
from ._abort_note import abort_note
from ._anthropic_stream import (
    AnthropicMessagesError,
    AsyncMessageStream,
    Draft,
    Msg,
    sdk,
    upstream_fault,
)
from ._anthropic_transcript import alternating, close_tool_uses, content_blocks, trim
from ._chat_room import ChatRoom, answer_in_room
from ._guidance import add_guidance
from ._settings import adapter_upstream
from ._tool import CUT_OFF_NOTE, Tool, run_tool, tool_table

__all__ = ["AnthropicAdapter", "AnthropicMessagesError", "anthropic"]

MAX_HISTORY = count(10_000, low=2)
"""What `BAND_ANTHROPIC_MAX_HISTORY` may be: entries kept per room, each sent again."""
MAX_TOKENS = count(1_000_000)
"""What `BAND_ANTHROPIC_MAX_TOKENS` may be."""


async def _close(stream: AsyncMessageStream[Any]) -> StopAnswer:
    await stream.close()
    return StopOutcome.REQUESTED, "response closed"


class AnthropicAdapter(Adapter):
    """Answers each message with a streamed Anthropic Messages call (see the module).

    `base_url` is the API's root (`https://api.anthropic.com`; the SDK adds
    `/v1/messages`); `api_key` defaults to `ANTHROPIC_API_KEY`, as the SDK's does.
    `upstream`: this adapter's retries, timeouts and read limits, instead of the
    agent's `Policy.upstream`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        system: str | None = None,
        tools: Sequence[Tool] = (),
        max_tokens: int = 4096,
        max_history: int = 50,
        max_rounds: int = 8,
        post_tool_events: bool = True,
        upstream: UpstreamPolicy | None = None,
    ) -> None:
        if not re.match(r"^https?://[^/\s]+", base_url):
            raise ConfigurationError(f"base URL must be http(s)://host[:port], not {base_url!r}")
        if not model.strip():
            raise ConfigurationError("model must not be blank")
        if max_tokens < 1 or max_history < 2 or max_rounds < 1:
            raise ConfigurationError(
                "max_tokens and max_rounds must be at least 1, max_history at least 2"
            )
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigurationError(
                "no API key: give api_key or set ANTHROPIC_API_KEY (any text for a local"
                " server that checks none)"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.system = system
        self.tools = tool_table(tools)
        self.max_tokens = max_tokens
        self.max_history = max_history
        self.max_rounds = max_rounds
        self.post_tool_events = post_tool_events
        self.upstream = upstream
        self._key = key
        self._rooms: dict[str, ChatRoom] = {}

    def history(self, room_id: str) -> list[Msg]:
        """The conversation kept for a room as the next request sends it (alternating
        roles, each `tool_use` answered; without the system prompt)."""
        room = self._rooms.get(room_id)
        return alternating(room.messages) if room else []

    async def on_room_left(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)

    async def on_turn(self, turn: Turn) -> None:
        room = self._rooms.setdefault(turn.room_id, ChatRoom())
        replay = _settle_abort(room, turn)
        limit = self.max_history
        await answer_in_room(
            room, turn, replay=replay, converse=self._converse,
            trim=lambda messages: trim(messages, limit),
        )  # fmt: skip

    # -- one turn -------------------------------------------------------------

    async def _converse(self, turn: Turn, messages: list[Msg]) -> str:
        """Ask the model, run the tools it asks for, ask again; return its final text."""
        upstream = self.upstream or turn.upstream
        client = sdk.AsyncAnthropic(
            api_key=self._key,
            base_url=self.base_url,
            max_retries=0,  # band-trio's retries (`call_upstream`), not the SDK's
            timeout=upstream_timeout(upstream),
            http_client=upstream_client(upstream),
        )

        async def complete() -> Msg:
            return await self._complete(turn, client, messages, upstream)

        try:
            for _ in range(self.max_rounds):
                answer = await call_upstream(
                    turn,
                    complete,
                    peer="the model provider",
                    upstream=upstream,
                    error=AnthropicMessagesError,
                )
                blocks = content_blocks(answer["content"])
                uses = [block for block in blocks if block["type"] == "tool_use"]
                if not uses:
                    text = "".join(block["text"] for block in blocks if block["type"] == "text")
                    if not text.strip():
                        raise AnthropicMessagesError("the model's answer was empty")
                    return text
                results: list[Msg] = []
                messages.append({"role": "user", "content": results})  # filled as tools end
                for use in uses:
                    result = await run_tool(
                        turn,
                        self.tools.get(use["name"]),
                        use["name"],
                        use["id"],
                        use["input"],
                        shown=_shown(use["input"]),
                        post_events=self.post_tool_events,
                    )
                    results.append(
                        {"type": "tool_result", "tool_use_id": use["id"], "content": result}
                    )
                add_guidance(turn, messages)  # merged into the results' user message
        finally:
            with trio.move_on_after(upstream.close_grace, shield=True):
                await client.close()
        raise AnthropicMessagesError(
            f"the model still asked for tools after {self.max_rounds} requests"
        )

    def _request(self, messages: list[Msg]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": alternating(messages),
        }
        if self.system:
            body["system"] = self.system
        if self.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in self.tools.values()
            ]
        return body

    async def _complete(
        self, turn: Turn, client: sdk.AsyncAnthropic, messages: list[Msg], upstream: UpstreamPolicy
    ) -> Msg:
        """One streamed request (one attempt); its assistant message is appended to
        `messages`. A fault raises `UpstreamFault` for `call_upstream` to judge.

        Cut off by an abort, the tool calls that arrived whole are appended."""
        draft = Draft(upstream.max_answer_chars)
        try:
            async with turn.remote(
                stop=_close, name="messages stream", closes_on_cancel=True
            ) as work:
                try:
                    async with client.messages.stream(**self._request(messages)) as stream:
                        work.started(stream, label=_label(stream.response.request.url))
                        with trio.CancelScope() as drain:
                            async for event in stream:
                                draft.add(event)
                                if draft.ended and drain.deadline == math.inf:
                                    # whole: the rest of the body gets its grace to end
                                    drain.deadline = trio.current_time() + upstream.drain_grace
                except sdk.APIError:
                    work.finished()  # the SDK read the error answer and closed it
                    raise
        except Exception as exc:
            fault = upstream_fault(exc, upstream.read_timeout)
            if fault is exc:
                raise
            raise fault from exc
        except BaseException:
            partial = draft.message(cut=True)
            if partial is not None:
                messages.append(partial)
            raise
        if not draft.ended:
            raise UpstreamFault.truncated("the stream ended before message_stop")
        answer = draft.message(cut=False)
        assert answer is not None
        messages.append(answer)
        return answer


def _shown(arguments: object) -> str:
    """A tool call's input as the `tool_call` event writes it (JSON)."""
    return json.dumps(arguments, ensure_ascii=False)


def _label(url: httpx2.URL) -> str:
    """`POST scheme://host[:port]/path`: no user info or query (a secret's places)."""
    port = f":{url.port}" if url.port is not None else ""
    return f"POST {url.scheme}://{url.host}{port}{url.path}"


# -- the conversation -----------------------------------------------------------------


def _settle_abort(room: ChatRoom, turn: Turn) -> bool:
    """If this room's last turn was aborted, make its history valid and tell the model.

    Returns True if this turn replays the aborted message (a stop, then play): its
    user message is in the history already."""
    cut, room.cut = room.cut, None
    note = abort_note(cut, turn)
    if note is None:
        return False
    abort = turn.last_abort
    if abort is not None and abort.message_id == cut:
        closed = close_tool_uses(room.messages, not_run_note(abort.kind, abort.reason))
    else:  # not a signal the runtime told us about: a turn deadline, a shutdown
        closed = close_tool_uses(room.messages, CUT_OFF_NOTE)
    if closed != room.messages:
        note += " Tool calls whose result says 'not run' did not run."
    room.messages[:] = closed
    room.messages.append({"role": "user", "content": note})
    return cut == turn.message.id


# -- configuration --------------------------------------------------------------------


def anthropic() -> AnthropicAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:anthropic`).

    `BAND_ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`),
    `BAND_ANTHROPIC_MODEL` (default `claude-sonnet-4-6`), `BAND_ANTHROPIC_API_KEY`
    (else `ANTHROPIC_API_KEY`), `BAND_ANTHROPIC_MAX_TOKENS` (default 4096),
    `BAND_ANTHROPIC_SYSTEM` (a system prompt) and `BAND_ANTHROPIC_MAX_HISTORY`
    (entries kept per room, default 50). No tools: those are given in code.
    Retries, timeouts and read limits: `BAND_ANTHROPIC_<FIELD>` for each
    `UpstreamPolicy` field over the agent-wide `BAND_UPSTREAM_<FIELD>`."""
    env = {
        key: value.strip() for key, value in os.environ.items() if key.startswith("BAND_ANTHROPIC_")
    }
    history = read_number(
        "BAND_ANTHROPIC_MAX_HISTORY", env.get("BAND_ANTHROPIC_MAX_HISTORY") or "50", MAX_HISTORY
    )
    tokens = read_number(
        "BAND_ANTHROPIC_MAX_TOKENS", env.get("BAND_ANTHROPIC_MAX_TOKENS") or "4096", MAX_TOKENS
    )
    base_url = env.get("BAND_ANTHROPIC_BASE_URL") or "https://api.anthropic.com"
    try:
        return AnthropicAdapter(
            base_url,
            env.get("BAND_ANTHROPIC_MODEL") or "claude-sonnet-4-6",
            api_key=env.get("BAND_ANTHROPIC_API_KEY") or None,
            system=os.environ.get("BAND_ANTHROPIC_SYSTEM") or None,
            max_tokens=int(tokens),
            max_history=int(history),
            upstream=adapter_upstream("BAND_ANTHROPIC_"),
        )
    except ConfigurationError as exc:
        if "API key" in str(exc):
            raise ConfigurationError(
                "no API key: set BAND_ANTHROPIC_API_KEY or ANTHROPIC_API_KEY (any text for a"
                " local server that checks none)"
            ) from None
        raise ConfigurationError(f"BAND_ANTHROPIC_BASE_URL: {exc}") from None
