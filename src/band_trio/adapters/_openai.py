"""An adapter for OpenAI-compatible chat completions servers, streamed, with tools.

    adapter = OpenAIChatAdapter("http://127.0.0.1:8765/v1", "gpt-4o", tools=[weather])

Each turn sends the room's conversation to `POST {base_url}/chat/completions`
with `"stream": true` and reads the server-sent events as they come; tool
calls the model asks for are run in order, their results appended, and the
model asked again (at most `max_rounds` requests per turn); the final text is
the reply. In a room that steers (`WhileBusy.STEER`), the messages that arrived
meanwhile are taken after each round's tool results, before the next request,
and added as user messages naming their sender (`_guidance.py`): they are the
turn's then, marked processed with it and never answered on their own.

How it stops. A chat completion has no cancel call: the client stops it by
closing the response, and a well-behaved server (uvicorn/Starlette, vLLM)
cancels its generator when it sees the disconnect. The
stream is opened with `stream_request`, so an interrupt or stop — which
cancels the turn — closes it as the turn's remote stop (`requested`), and a
tool that is running is cancelled where it awaits.

What the room's history keeps after an abort. The messages of
an aborted turn stay: the user's message, every complete assistant message,
the results of the tools that finished, and — for an assistant message cut
off mid-stream — its tool calls but not its partial text (nobody saw it).
Nothing is repaired at the moment of the abort, because only the next turn
knows what the abort was: `Turn.last_abort` gives its kind and reason. So the
next turn in the room first closes every dangling tool call with
`close_tool_calls` (`"not run: the turn was interrupted by the user (reason:
…)"`), which also drops a call cut off before its arguments were complete,
then adds one system message telling the model its previous answer was
interrupted or stopped, and why. An abort the signal did not explain (a turn
deadline, a shutdown) is closed with a neutral note. A stopped message that
is replayed after play is not added a second time: the note asks the model to
answer it again. A turn that fails (an error, not an abort) is rolled back:
the message is marked failed and the model never saw the exchange.

Upstream faults (docs/reference/adapters.md, "Upstream faults"). Each request
goes through `call_upstream`: a 408/409/429/5xx/529, no connection, a connection
dropped or silent for `UpstreamPolicy.read_timeout`, and a stream that ended
before `[DONE]` or a `finish_reason` are asked again (up to `attempts`,
honouring `Retry-After` / `retry-after-ms`, backoff with full jitter
otherwise), since nothing of an answer is posted before it is whole; a 400 or a
malformed chunk fails the turn at once, with the reason. Tool events posted in
an earlier round are not posted again by a retry: only the request is.

The HTTP client lives for one turn (`httpx2.AsyncClient`, closed shielded on
the way out, keep-alive across the turn's rounds): an adapter outlives turns
but has no hook at the agent's end, and a client per turn leaves no socket
open once the agent stops. The TLS context, the costly part, is made once.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence

import httpx2
import trio

from .._ranges import count, read_number
from ..contract import (
    Adapter,
    Turn,
    UpstreamFault,
    call_upstream,
    check_status,
    close_tool_calls,
    read_body,
    stream_request,
    upstream_client,
)
from ..errors import ConfigurationError
from ..policy import UpstreamPolicy
from ._chat_room import ChatRoom, answer_in_room
from ._guidance import add_guidance
from ._openai_stream import Draft, Msg, OpenAIChatError, decode, read_stream
from ._settings import adapter_upstream
from ._tool import CUT_OFF_NOTE, Tool, run_tool, tool_table

__all__ = ["OpenAIChatAdapter", "OpenAIChatError", "Tool", "openai_chat"]

MAX_HISTORY = count(10_000, low=2)
"""What `BAND_OPENAI_MAX_HISTORY` may be: messages kept per room, each sent again."""
_UNEXPLAINED = CUT_OFF_NOTE


class OpenAIChatAdapter(Adapter):
    """Answers each message with an OpenAI-compatible chat completion (see the module).

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
        max_history: int = 50,
        max_rounds: int = 8,
        post_tool_events: bool = True,
        upstream: UpstreamPolicy | None = None,
    ) -> None:
        if not re.match(r"^https?://[^/\s]+", base_url):
            raise ConfigurationError(
                f"base URL must be http(s)://host[:port]/..., not {base_url!r}"
            )
        if not model.strip():
            raise ConfigurationError("model must not be blank")
        if max_history < 2 or max_rounds < 1:
            raise ConfigurationError("max_history must be at least 2 and max_rounds at least 1")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.system = system
        self.tools = tool_table(tools)
        self.max_history = max_history
        self.max_rounds = max_rounds
        self.post_tool_events = post_tool_events
        self.upstream = upstream
        self._headers = {"accept": "text/event-stream"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._rooms: dict[str, ChatRoom] = {}

    def history(self, room_id: str) -> list[Msg]:
        """A copy of the conversation kept for a room (without the system prompt)."""
        room = self._rooms.get(room_id)
        return [dict(m) for m in room.messages] if room else []

    async def on_room_left(self, room_id: str) -> None:
        self._rooms.pop(room_id, None)

    async def on_turn(self, turn: Turn) -> None:
        room = self._rooms.setdefault(turn.room_id, ChatRoom())
        replay = _settle_abort(room, turn)
        limit = self.max_history
        await answer_in_room(
            room, turn, replay=replay, converse=self._converse,
            trim=lambda messages: _trim(messages, limit),
        )  # fmt: skip

    # -- one turn -------------------------------------------------------------

    async def _converse(self, turn: Turn, messages: list[Msg]) -> str:
        """Ask the model, run the tools it asks for, ask again; return its final text."""
        upstream = self.upstream or turn.upstream
        client = upstream_client(upstream, headers=self._headers)

        async def complete() -> Msg:
            return await self._complete(turn, client, messages, upstream)

        try:
            for _ in range(self.max_rounds):
                answer = await call_upstream(
                    turn,
                    complete,
                    peer="the model provider",
                    upstream=upstream,
                    error=OpenAIChatError,
                )
                calls = answer.get("tool_calls")
                if not calls:
                    text = answer.get("content") or ""
                    if not text.strip():
                        raise OpenAIChatError("the model's answer was empty")
                    return str(text)
                for call in calls:
                    result = await self._run_tool(turn, call)
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
                add_guidance(turn, messages)  # between model calls: read by the next one
        finally:
            with trio.move_on_after(upstream.close_grace, shield=True):
                await client.aclose()
        raise OpenAIChatError(f"the model still asked for tools after {self.max_rounds} requests")

    def _request(self, messages: list[Msg]) -> Msg:
        prompt = [{"role": "system", "content": self.system}] if self.system else []
        body: Msg = {"model": self.model, "messages": prompt + messages, "stream": True}
        if self.tools:
            body["tools"] = [tool.spec() for tool in self.tools.values()]
        return body

    async def _complete(
        self, turn: Turn, client: httpx2.AsyncClient, messages: list[Msg], upstream: UpstreamPolicy
    ) -> Msg:
        """One streamed completion (one attempt); its assistant message is appended to
        `messages`. A fault of the exchange raises `UpstreamFault` or httpx2's error,
        for `call_upstream` to judge.

        Cut off by an abort, what arrived so far is appended (tool calls only)."""
        draft = Draft(upstream.max_answer_chars)
        try:
            async with stream_request(
                turn, client, "POST", self.url, json=self._request(messages), name="chat completion"
            ) as response:
                await check_status(response, upstream)
                if "text/event-stream" in response.headers.get("content-type", ""):
                    await read_stream(response, draft, upstream)
                else:  # a server that ignored "stream": one JSON answer
                    draft.whole(decode(await read_body(response, upstream.max_body)))
        except BaseException as exc:
            if not isinstance(exc, Exception):
                partial = draft.message(cut=True)
                if partial is not None:
                    messages.append(partial)
            raise
        if not draft.ended:
            raise UpstreamFault.truncated("the stream ended before [DONE] or a finish_reason")
        answer = draft.message(cut=False)
        assert answer is not None
        messages.append(answer)
        return answer

    async def _run_tool(self, turn: Turn, call: Msg) -> str:
        function = call["function"]
        name = function["name"]
        try:
            arguments = json.loads(function["arguments"] or "{}")
        except ValueError as exc:
            return f"error: the arguments are not valid JSON ({exc})"
        return await run_tool(
            turn,
            self.tools.get(name),
            name,
            call["id"],
            arguments,
            shown=function["arguments"],
            post_events=self.post_tool_events,
        )


# -- the conversation -----------------------------------------------------------------


def _settle_abort(room: ChatRoom, turn: Turn) -> bool:
    """If this room's last turn was aborted, make its history valid and tell the model.

    Returns True if this turn replays the aborted message (a stop, then play): its
    user message is in the history already."""
    cut, room.cut = room.cut, None
    if cut is None:
        return False
    replay = cut == turn.message.id
    abort = turn.last_abort
    if abort is not None and abort.message_id == cut:
        closed = close_tool_calls(room.messages, abort.kind, abort.reason)
        verb = "interrupted" if abort.kind == "interrupt" else "stopped"
        why = " ".join((abort.reason or "").split())
        note = f"Your previous answer was {verb} by the user" + (f" (reason: {why})" if why else "")
    else:  # not a signal the runtime told us about: a turn deadline, a shutdown
        closed = close_tool_calls(room.messages, "interrupt", note=_UNEXPLAINED)
        note = "Your previous answer was cut off"
    note += " before it was posted, so nobody saw it."
    if closed != room.messages:
        note += " Tool calls whose result says 'not run' did not run."
    if replay:
        note += " The room has resumed: answer the message again."
    room.messages[:] = closed
    room.messages.append({"role": "system", "content": note})
    return replay


def _trim(messages: list[Msg], limit: int) -> list[Msg]:
    """The last `limit` messages or fewer, starting at a user message so that no tool
    result loses its call. The latest exchange is kept whole even if it is longer."""
    if len(messages) <= limit:
        return messages
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    fitting = [i for i in starts if len(messages) - i <= limit]
    if fitting:
        return messages[fitting[0] :]
    return messages[starts[-1] :] if starts else messages[-limit:]


# -- configuration --------------------------------------------------------------------


def openai_chat() -> OpenAIChatAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:openai_chat`).

    `BAND_OPENAI_BASE_URL` (required, e.g. `http://127.0.0.1:8765/v1`),
    `BAND_OPENAI_MODEL` (default `gpt-4o`), `BAND_OPENAI_API_KEY`,
    `BAND_OPENAI_SYSTEM` (a system prompt) and `BAND_OPENAI_MAX_HISTORY` (messages
    kept per room, default 50). No tools: those are given in code. Retries,
    timeouts and read limits: `BAND_OPENAI_<FIELD>` for each `UpstreamPolicy` field
    (`BAND_OPENAI_READ_TIMEOUT`, `BAND_OPENAI_ATTEMPTS`, …) over the agent-wide
    `BAND_UPSTREAM_<FIELD>`."""
    env = {
        key: value.strip() for key, value in os.environ.items() if key.startswith("BAND_OPENAI_")
    }
    base_url = env.get("BAND_OPENAI_BASE_URL")
    if not base_url:
        raise ConfigurationError("BAND_OPENAI_BASE_URL is not set (e.g. http://127.0.0.1:8765/v1)")
    history = read_number(
        "BAND_OPENAI_MAX_HISTORY", env.get("BAND_OPENAI_MAX_HISTORY") or "50", MAX_HISTORY
    )
    try:
        return OpenAIChatAdapter(
            base_url,
            env.get("BAND_OPENAI_MODEL") or "gpt-4o",
            api_key=env.get("BAND_OPENAI_API_KEY") or None,
            system=os.environ.get("BAND_OPENAI_SYSTEM") or None,
            max_history=int(history),
            upstream=adapter_upstream("BAND_OPENAI_"),
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"BAND_OPENAI_BASE_URL: {exc}") from None
