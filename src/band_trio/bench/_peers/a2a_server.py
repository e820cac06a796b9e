"""A real a2a-sdk 1.3.0 server used as a local test peer (run as a subprocess, never imported).

    python src/band_trio/bench/_peers/a2a_server.py --port 0 --ready-file F --events-file E

It serves protocol 1.0 JSON-RPC at ``POST /`` (with the 0.3 compat names enabled), HTTP+JSON
(``/message:send``, ``/tasks/{id}:cancel``, ...) and the agent card at
``/.well-known/agent-card.json``, on 127.0.0.1 with uvicorn.

The executor's behaviour is chosen per message by ``key=value`` words in the message text,
e.g. ``mode=normal chunks=40 delay=0.05``. Words that are not ``key=value`` are ignored.

    mode=normal    (default) stream ``chunks`` artifact chunks, ``delay`` s apart, then COMPLETED;
                   cancel() publishes TaskUpdater.cancel -> a CANCELED statusUpdate on the stream.
                   ``cancel_delay=S`` makes cancel() take S seconds first (a slow but
                   cooperative peer).
    mode=silent    cancel() only cleans up; execute() is cancelled. The stream ends (EOF)
                   without a terminal event; the SDK writes CANCELED to the store.
    mode=stubborn  cancel() raises UnsupportedOperationError: CancelTask answers -32002 and the
                   task ends FAILED (the SDK cancels the producer anyway).
    mode=swallow   execute() swallows the first CancelledError and keeps streaming, then returns
                   without a terminal state: CancelTask never answers. A second cancellation
                   (server shutdown) ends it, so the process still exits.
    mode=message   answer with one plain Message ("echo: <text>"), no task.
    mode=quick     one artifact, COMPLETED at once.
    mode=fail      stream ``chunks`` chunks, then raise: the task ends FAILED.

Defaults: chunks=10 delay=0.05 cancel_delay=0. An unknown mode fails the task (FAILED) and
records an ``unknown_mode`` event.

Everything observable is appended to ``--events-file`` as one JSON object per line (flushed),
each with ``event``, ``perf`` (time.perf_counter(), comparable across processes on one host)
and ``time`` (time.time()). The events and their keys: tests/peers/fixtures.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import time
from pathlib import Path
from typing import Any

from a2a.helpers.proto_helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError
from starlette.applications import Starlette

from band_trio.bench._peers._uvicorn import EventLog, listen, serve

TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}
MODES = {"normal", "silent", "stubborn", "swallow", "message", "quick", "fail"}


def parse_directives(text: str) -> dict[str, Any]:
    """``mode=normal chunks=40 delay=0.05`` -> {"mode": "normal", "chunks": 40, "delay": 0.05}."""
    found = dict(re.findall(r"(\w+)=(\S+)", text))
    return {
        "mode": found.get("mode", "normal"),
        "chunks": int(found.get("chunks", 10)),
        "delay": float(found.get("delay", 0.05)),
        "cancel_delay": float(found.get("cancel_delay", 0)),
    }


class ModalExecutor(AgentExecutor):
    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.directives: dict[str, dict[str, Any]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        d = parse_directives(text)
        task_id = context.task_id or ""
        context_id = context.context_id or ""
        self.directives[task_id] = d
        mode = d["mode"]
        self.log.emit("execute_started", task_id=task_id, context_id=context_id, text=text, **d)
        if mode not in MODES:  # a typo must not quietly run another scenario: the task FAILS
            self.log.emit("unknown_mode", task_id=task_id, mode=mode)
            raise ValueError(f"unknown mode {mode!r}; expected one of {sorted(MODES)}")

        if mode == "message":
            reply = new_text_message(f"echo: {text}", context_id=context_id)
            await event_queue.enqueue_event(reply)
            self.log.emit("message_sent", message_id=reply.message_id, context_id=context_id)
            self.log.emit("execute_finished", task_id=task_id, mode=mode, how="returned")
            return

        if context.current_task is None:
            task = new_task(
                task_id,
                context_id,
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message] if context.message else None,
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()

        if mode == "quick":
            await self._chunk(updater, task_id, 0, "done")
            await updater.complete()
            self.log.emit("execute_finished", task_id=task_id, mode=mode, how="returned")
            return

        swallowed = False
        i = 0
        try:
            while i < d["chunks"]:
                try:
                    await asyncio.sleep(d["delay"])
                    await self._chunk(updater, task_id, i, f"chunk {i} ")
                    i += 1
                except asyncio.CancelledError:
                    if mode == "swallow" and not swallowed:
                        swallowed = True
                        self.log.emit(
                            "executor_cancelled", task_id=task_id, mode=mode, swallowed=True
                        )
                        continue
                    raise
        except asyncio.CancelledError:
            self.log.emit("executor_cancelled", task_id=task_id, mode=mode, swallowed=False)
            self.log.emit("execute_finished", task_id=task_id, mode=mode, how="cancelled")
            raise
        if mode == "fail":
            self.log.emit("execute_finished", task_id=task_id, mode=mode, how="raised")
            raise RuntimeError("mode=fail: the executor failed on purpose")
        if mode == "swallow":
            # Return with the task still WORKING: the SDK's cancel waits for ever.
            self.log.emit("execute_finished", task_id=task_id, mode=mode, how="returned")
            return
        await updater.complete()
        self.log.emit("execute_finished", task_id=task_id, mode=mode, how="returned")

    async def _chunk(self, updater: TaskUpdater, task_id: str, index: int, text: str) -> None:
        await updater.add_artifact(
            [new_text_part(text)],
            artifact_id="stream-1",
            name="slow-output",
            append=index > 0,
        )
        self.log.emit("chunk_sent", task_id=task_id, index=index)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = context.task_id or ""
        d = self.directives.get(task_id, parse_directives(""))
        mode = d["mode"]
        self.log.emit("cancel_called", task_id=task_id, mode=mode)
        if mode == "stubborn":
            self.log.emit("cancel_refused", task_id=task_id, mode=mode)
            raise UnsupportedOperationError(message="mode=stubborn refuses to cancel")
        if mode in ("silent", "swallow"):
            return  # cleanup only: no terminal event
        if d["cancel_delay"] > 0:
            await asyncio.sleep(d["cancel_delay"])
        updater = TaskUpdater(event_queue, task_id, context.context_id or "")
        await updater.cancel(updater.new_agent_message([new_text_part("cancelled on request")]))
        self.log.emit("cancel_published", task_id=task_id, mode=mode)


class RecordingTaskStore(InMemoryTaskStore):
    """Records task creation, every state change and the terminal state."""

    def __init__(self, log: EventLog) -> None:
        super().__init__()
        self.log = log
        self.states: dict[str, int] = {}

    async def save(self, task: Task, context: Any) -> None:
        await super().save(task, context)
        previous = self.states.get(task.id)
        state = task.status.state
        if previous is None:
            self.log.emit("task_created", task_id=task.id, context_id=task.context_id)
        if previous != state:
            self.states[task.id] = state
            name = TaskState.Name(state)
            self.log.emit("task_state", task_id=task.id, state=name)
            if state in TERMINAL:
                self.log.emit(
                    "terminal", task_id=task.id, state=name, artifacts=len(task.artifacts)
                )


_REST_CANCEL = re.compile(r"^(?:/[^/]+)?(?:/v1)?/tasks/([^/:]+):cancel$")


class RecordingMiddleware:
    """Pure ASGI middleware: records each request (and cancel requests) before the app runs."""

    def __init__(self, app: Any, log: EventLog) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
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
        body = b"".join(parts)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path = scope["path"]
        rpc: dict[str, Any] = {}
        if body:
            with contextlib.suppress(ValueError):
                decoded = json.loads(body)
                if isinstance(decoded, dict):
                    rpc = decoded
        method = rpc.get("method") if path == "/" else None
        rpc_id = rpc.get("id") if path == "/" else None
        self.log.emit(
            "request",
            http_method=scope["method"],
            path=path,
            method=method,
            jsonrpc_id=rpc_id,
            a2a_version=headers.get("a2a-version"),
            body=rpc or None,
            perf=perf,
            time=wall,
        )
        cancel_task_id = None
        if method in ("CancelTask", "tasks/cancel"):
            params = rpc.get("params") or {}
            cancel_task_id = params.get("id") if isinstance(params, dict) else None
            protocol = "jsonrpc-1.0" if method == "CancelTask" else "jsonrpc-0.3"
        elif scope["method"] == "POST" and (m := _REST_CANCEL.match(path)):
            cancel_task_id = m.group(1)
            protocol = "rest"
        if cancel_task_id is not None or method in ("CancelTask", "tasks/cancel"):
            self.log.emit(
                "cancel_request",
                task_id=cancel_task_id,
                protocol=protocol,
                jsonrpc_id=rpc_id,
                perf=perf,
                time=wall,
            )

        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            message = await receive()
            if message["type"] == "http.disconnect":
                # after_response: uvicorn also reports a disconnect once a response is done.
                self.log.emit(
                    "disconnect",
                    path=path,
                    method=method,
                    jsonrpc_id=rpc_id,
                    after_response=finished[0],
                )
            return message  # type: ignore[no-any-return]  # ASGI messages are untyped dicts

        status: list[int] = []
        finished = [False]

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished[0] = True
            await send(message)

        try:
            await self.app(scope, replay, send_wrapper)
        finally:
            self.log.emit(
                "response_end",
                path=path,
                method=method,
                jsonrpc_id=rpc_id,
                status=status[0] if status else None,
            )


def build_card(url: str) -> AgentCard:
    return AgentCard(
        name="band-trio-test-peer",
        description="Per-message modes: normal, silent, stubborn, swallow, message, quick, fail.",
        supported_interfaces=[
            AgentInterface(url=url + "/", protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=url, protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ],
        version="0.0.1",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="modes",
                name="modes",
                description="streams chunks; misbehaves on request",
                tags=["test"],
            )
        ],
    )


def build_app(url: str, log: EventLog) -> Any:
    card = build_card(url)
    handler = DefaultRequestHandler(
        agent_executor=ModalExecutor(log),
        task_store=RecordingTaskStore(log),
        agent_card=card,
    )
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True),
    ]
    return RecordingMiddleware(Starlette(routes=routes), log)


async def main(args: argparse.Namespace) -> None:
    log = EventLog(Path(args.events_file))
    sock = listen(args.port)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    await serve(
        sock, build_app(url, log), log, Path(args.ready_file), args.log_level, url=url + "/"
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--events-file", required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    asyncio.run(main(args))


if __name__ == "__main__":
    cli()
