"""stubllm 0.1.5 as a local OpenAI-compatible (and Anthropic) SSE test peer (run as a subprocess).

    python src/band_trio/bench/_peers/stubllm_server.py --port 0 --ready-file F --events-file E \
        [--fixture-file stubllm_fixtures.yaml] [--chunk-delay-ms 50]

It runs stubllm's own FastAPI app (``stubllm.server.create_app``) with uvicorn on 127.0.0.1 and
records what the server saw to ``--events-file``, one JSON object per line (flushed), each with
``event``, ``perf`` (time.perf_counter(), comparable across processes on one host) and ``time``:

    request          every HTTP request: req (1, 2, ...), http_method, path, body (the full JSON)
    match            which fixture answered: req, fixture, call_index (position in a sequence)
    stream_started   req, fixture
    chunk            one per SSE frame sent: req, count (frames so far), kind
                     ("content" | "tool_calls" | "finish" | "done"; on /v1/messages the
                     event's name: "message_start", "content_block_delta", ...)
    stream_cancelled the streaming generator was stopped before its end: req, count,
                     how ("cancelled": CancelledError, the client-disconnect path;
                          "closed": GeneratorExit from aclose/GC)
    stream_completed the stream ended normally after [DONE]: req, count
    disconnect       the ASGI app received http.disconnect: req, path, after_response
    response_end     the app returned: req, path, status

How the streaming generator is observed: stubllm's ``BaseProvider.make_streaming_response``
imports ``stubllm.streaming.sse.stream_response`` at call time, so replacing that module
attribute here wraps every stream without touching site-packages.

Two OpenAI-fidelity fixes are applied to streamed tool calls (``--raw`` turns them off):
stubllm 0.1.5 gives every tool call ``index: 0`` (a client that merges deltas by index would
fuse parallel calls) and sends no chunk with ``finish_reason: "tool_calls"``. The wrapper
numbers the calls 0, 1, ... and sends that finish chunk before ``[DONE]``, as OpenAI does.

The Anthropic route (``/v1/messages``) streams Anthropic's Messages events as Anthropic
documents them, not stubllm 0.1.5's OpenAI-shaped approximation (``stubllm_anthropic.py``
says what differs; ``--raw`` keeps stubllm's); its tool results match the fixtures'
``role: tool`` criteria.

``--chunk-delay-ms`` applies to every fixture response that does not set
``stream_chunk_delay_ms`` itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import stubllm.providers.anthropic as anthropic_provider
import stubllm.streaming.sse as sse
from stubllm.fixtures.loader import FixtureLoader
from stubllm.fixtures.models import Fixture, MockResponse
from stubllm.server import create_app

from band_trio.bench._peers._uvicorn import EventLog, listen, serve
from band_trio.bench._peers.stubllm_anthropic import anthropic_stream, normalize_messages

HERE = Path(__file__).resolve().parent
DEFAULT_FIXTURES = HERE / "stubllm_fixtures.yaml"

current_req: contextvars.ContextVar[int] = contextvars.ContextVar("current_req", default=0)
current_fixture: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_fixture", default=None
)


def load_fixtures(path: Path, chunk_delay_ms: int) -> list[Fixture]:
    fixtures = FixtureLoader().load_file(path)

    def with_delay(response: MockResponse) -> MockResponse:
        if "stream_chunk_delay_ms" in response.model_fields_set:
            return response
        return response.model_copy(update={"stream_chunk_delay_ms": chunk_delay_ms})

    for fixture in fixtures:
        fixture.response = with_delay(fixture.response)
        if fixture.sequence:
            fixture.sequence = [with_delay(r) for r in fixture.sequence]
    return fixtures


def _kind(chunk: str) -> tuple[str, dict[str, Any] | None]:
    payload = chunk.strip()
    if payload.startswith("event:"):  # Anthropic's: named by its event
        return payload.split("\n", 1)[0][6:].strip(), None
    if not payload.startswith("data:"):
        return "other", None
    data = payload[5:].strip()
    if data == "[DONE]":
        return "done", None
    try:
        decoded = json.loads(data)
    except ValueError:
        return "other", None
    choices = decoded.get("choices") or [{}]
    delta = choices[0].get("delta") or {}
    if delta.get("tool_calls"):
        return "tool_calls", decoded
    return "content", decoded


def install_stream_wrapper(log: EventLog, *, raw: bool) -> None:
    original = sse.stream_response

    async def observed(
        provider: Any, response: MockResponse, model: str, request_id: str
    ) -> AsyncIterator[str]:
        req = current_req.get()
        log.emit("stream_started", req=req, fixture=current_fixture.get())
        count = 0
        tool_index = 0
        if not raw and isinstance(provider, anthropic_provider.AnthropicProvider):
            source = anthropic_stream(response, model, request_id)
        else:
            source = original(provider, response, model, request_id)
        finished = False
        try:
            async for chunk in source:
                kind, decoded = _kind(chunk)
                if not raw and kind == "tool_calls" and decoded is not None:
                    decoded["choices"][0]["delta"]["tool_calls"][0]["index"] = tool_index
                    tool_index += 1
                    chunk = f"data: {json.dumps(decoded)}\n\n"
                if not raw and kind == "done" and tool_index:
                    finish = {
                        "id": request_id,
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "delta": {},
                                "finish_reason": "tool_calls",
                                "logprobs": None,
                            }
                        ],
                    }
                    yield f"data: {json.dumps(finish)}\n\n"
                    count += 1
                    log.emit("chunk", req=req, count=count, kind="finish")
                yield chunk
                count += 1
                log.emit("chunk", req=req, count=count, kind=kind)
            finished = True
        except asyncio.CancelledError:
            log.emit("stream_cancelled", req=req, count=count, how="cancelled")
            raise
        except GeneratorExit:
            log.emit("stream_cancelled", req=req, count=count, how="closed")
            raise
        finally:
            await source.aclose()  # type: ignore[attr-defined]  # an async generator
        if finished:
            log.emit("stream_completed", req=req, count=count)

    sse.stream_response = observed
    if not raw:  # read by the route at call time, as `stream_response` is
        anthropic_provider._normalize_messages = normalize_messages


def install_match_recorder(app: Any, log: EventLog) -> None:
    matcher = app.state.matcher
    match = matcher.match

    def recorded(**kwargs: Any) -> tuple[Fixture, str]:
        fixture, name = match(**kwargs)
        current_fixture.set(name)
        index = app.state.fixture_call_counts.get(name, 0)
        log.emit("match", req=current_req.get(), fixture=name, call_index=index)
        return fixture, name

    matcher.match = recorded


class RecordingMiddleware:
    """Pure ASGI middleware: numbers requests, records bodies, disconnects and completion."""

    def __init__(self, app: Any, log: EventLog) -> None:
        self.app = app
        self.log = log
        self.counter = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.counter += 1
        req = self.counter
        current_req.set(req)
        perf = time.perf_counter()
        wall = time.time()
        parts: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            parts.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        raw_body = b"".join(parts)
        body: Any = None
        if raw_body:
            try:
                body = json.loads(raw_body)
            except ValueError:
                body = raw_body.decode("utf-8", "replace")
        path = scope["path"]
        self.log.emit(
            "request",
            req=req,
            http_method=scope["method"],
            path=path,
            body=body,
            perf=perf,
            time=wall,
        )
        finished = [False]
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": raw_body, "more_body": False}
            message = await receive()
            if message["type"] == "http.disconnect":
                self.log.emit("disconnect", req=req, path=path, after_response=finished[0])
            return message  # type: ignore[no-any-return]  # ASGI messages are untyped dicts

        status: list[int] = []

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished[0] = True
            await send(message)

        try:
            await self.app(scope, replay, send_wrapper)
        finally:
            self.log.emit("response_end", req=req, path=path, status=status[0] if status else None)


async def main(args: argparse.Namespace) -> None:
    log = EventLog(Path(args.events_file))
    install_stream_wrapper(log, raw=args.raw)
    app = create_app(fixtures=load_fixtures(Path(args.fixture_file), args.chunk_delay_ms))
    install_match_recorder(app, log)
    sock = listen(args.port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    await serve(
        sock, RecordingMiddleware(app, log), log, Path(args.ready_file), args.log_level,
        url=url + "/", base_url=url + "/v1",
    )  # fmt: skip


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--events-file", required=True)
    parser.add_argument("--fixture-file", default=str(DEFAULT_FIXTURES))
    parser.add_argument("--chunk-delay-ms", type=int, default=50)
    parser.add_argument("--raw", action="store_true", help="stream tool calls as stubllm does")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    asyncio.run(main(args))


if __name__ == "__main__":
    cli()
