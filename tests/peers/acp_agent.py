"""A small ACP agent built on PyPI's `agent-client-protocol` SDK (asyncio), run as a process:
the tests hold the ACP adapter to the protocol as another implementation speaks it, not
to one agent's habits.

    python acp_agent.py [--auth METHOD] [--no-load] [--start exit|old|garbage]

What a prompt does is chosen by a marker in its last paragraph (the message, after the
room's history or a note the adapter may put before it):

    [quick]        answers "quick answer" in two chunks
    [slow]         80 chunks "w00 " ... "w79 ", 50 ms apart; `session/cancel` ends it
                   (`stopReason: "cancelled"`)
    [ignore]       10 chunks 50 ms apart, ignoring `session/cancel`, then `end_turn`
    [late]         waits 30 s before its first chunk; `session/cancel` ends it
    [once]         as [slow] the first time the session has it, then "answered again"
    [tool]         a tool call (`execute`, started, then completed), then "tool done"
    [ask KIND]     asks permission for a tool of kind KIND, answers "asked: OUTCOME"
    [ask-late]     waits for `session/cancel`, then asks permission (`execute`), then
                   ends `cancelled`
    [read PATH]    reads PATH with `fs/read_text_file`, answers its text
    [write PATH]   writes "written" to PATH with `fs/write_text_file`, answers "wrote"
    [run CMD]      runs `sh -c CMD` with `terminal/*` (in `[in DIR]` if the prompt says so),
                   answers "exit CODE SIGNAL: OUTPUT"
    [run-long]     runs `sleep 30`; at `session/cancel` kills and releases it, then ends
                   `cancelled`
    [die]          writes to stderr and exits 3 in the middle of its answer
    [garbage]      writes a line that is not JSON, one over 9 MiB, a request of an
                   unknown method and a notification, then answers "still here"
    [refuse]       `stopReason: "refusal"`
    [recall]       answers with every prompt this session has had, " | "-joined
    anything else  answers "echo: <the prompt's text>"

Sessions are kept in files in the working directory (`acp-sessions/<id>.json`), so a
new process can `session/load` them (replaying the prompts as `user_message_chunk`s)
unless `--no-load`. With `--auth`, `initialize` lists that method and `session/new`
fails until `authenticate` names it. `--start` misbehaves at once: `exit` (stderr,
status 3), `old` (protocol version 2), `garbage` (no JSON, then silence).

Every step is appended to `acp-agent.events.jsonl` in the working directory (one JSON
object a line: `event`, `pid`, `perf` = time.perf_counter(), comparable with the test's
own on the same host): `initialize`, `authenticate`, `new_session`, `load_session`,
`prompt` (text), `cancel`, `prompt_end` (stop_reason), `permission` (outcome), `exit`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import acp
from acp import schema
from acp.helpers import (
    start_tool_call,
    text_block,
    update_agent_message_text,
    update_tool_call,
    update_user_message_text,
)

EVENTS = Path("acp-agent.events.jsonl")
SESSIONS = Path("acp-sessions")


def record(event: str, **fields: Any) -> None:
    line = {"event": event, "pid": os.getpid(), "perf": time.perf_counter(), **fields}
    with EVENTS.open("a") as file:
        file.write(json.dumps(line) + "\n")


class TestAgent:
    def __init__(self, auth: str | None, load: bool) -> None:
        self.auth = auth
        self.authenticated = auth is None
        self.load = load
        self.cancelled: dict[str, asyncio.Event] = {}
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        capabilities = kwargs.get("client_capabilities")
        record(
            "initialize",
            protocol_version=protocol_version,
            fs=_fs(capabilities),
            terminal=bool(getattr(capabilities, "terminal", False)),
        )
        methods = [schema.AuthMethodAgent(id=self.auth, name="a test key")] if self.auth else []
        return schema.InitializeResponse(
            protocol_version=1,
            agent_capabilities=schema.AgentCapabilities(load_session=self.load),
            auth_methods=methods,
            agent_info=schema.Implementation(name="acp-test-agent", version="1"),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> schema.AuthenticateResponse:
        record("authenticate", method_id=method_id)
        if method_id != self.auth:
            raise acp.RequestError.invalid_params({"methodId": method_id})
        self.authenticated = True
        return schema.AuthenticateResponse()

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        if not self.authenticated:
            raise acp.RequestError.auth_required()
        session_id = f"sess-{uuid.uuid4().hex[:12]}"
        _save(session_id, [])
        record("new_session", session_id=session_id, cwd=cwd)
        return schema.NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> schema.LoadSessionResponse:
        record("load_session", session_id=session_id)
        prompts = _load(session_id)
        if prompts is None:
            raise acp.RequestError.resource_not_found(session_id)
        for text in prompts:
            await self.conn.session_update(session_id, update_user_message_text(text))
            await self.conn.session_update(session_id, update_agent_message_text("(replayed)"))
        return schema.LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        record("cancel", session_id=session_id)
        self.cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> Any:
        text = "".join(getattr(block, "text", "") for block in prompt)
        record("prompt", session_id=session_id, text=text)
        history = _load(session_id) or []
        _save(session_id, [*history, text])
        cancelled = self.cancelled[session_id] = asyncio.Event()
        reason = await self._answer(session_id, text, history, cancelled)
        record("prompt_end", session_id=session_id, stop_reason=reason)
        return schema.PromptResponse(stop_reason=reason)

    async def _answer(
        self, session_id: str, text: str, history: list[str], cancelled: asyncio.Event
    ) -> str:
        async def say(words: str) -> None:
            await self.conn.session_update(session_id, update_agent_message_text(words))

        whole, text = text, text.rsplit("\n\n", 1)[-1]

        if "[quick]" in text:
            await say("quick ")
            await say("answer")
        elif "[once]" in text and any("[once]" in earlier for earlier in history):
            await say("answered again")
        elif "[ignore]" in text:
            for i in range(10):
                await say(f"i{i:02d} ")
                await asyncio.sleep(0.05)
        elif "[slow]" in text or "[late]" in text or "[once]" in text:
            if "[late]" in text and await _cancelled_within(cancelled, 30):
                return "cancelled"
            for i in range(80):
                await say(f"w{i:02d} ")
                if await _cancelled_within(cancelled, 0.05):
                    return "cancelled"
        elif "[tool]" in text:
            await self.conn.session_update(
                session_id, start_tool_call("t1", "run the tests", kind="execute", status="pending")
            )
            done = [schema.ContentToolCallContent(type="content", content=text_block("3 passed"))]
            await self.conn.session_update(
                session_id, update_tool_call("t1", status="completed", content=done)
            )
            await say("tool done")
        elif "[ask-late]" in text:
            await _cancelled_within(cancelled, 30)
            await self._ask(session_id, "execute")
            return "cancelled"
        elif "[ask " in text:
            kind = text.split("[ask ", 1)[1].split("]", 1)[0]
            outcome = await self._ask(session_id, kind)
            await say(f"asked: {outcome}")
        elif "[read " in text:
            path = text.split("[read ", 1)[1].split("]", 1)[0]
            read = await self.conn.read_text_file(session_id=session_id, path=path)
            await say(read.content)
        elif "[write " in text:
            path = text.split("[write ", 1)[1].split("]", 1)[0]
            await self.conn.write_text_file(session_id=session_id, path=path, content="written")
            await say("wrote")
        elif "[run-long]" in text:
            made = await self.conn.create_terminal(
                session_id=session_id, command="sleep", args=["30"]
            )
            await _cancelled_within(cancelled, 30)
            await self.conn.kill_terminal(session_id=session_id, terminal_id=made.terminal_id)
            out = await self.conn.terminal_output(
                session_id=session_id, terminal_id=made.terminal_id
            )
            await self.conn.release_terminal(session_id=session_id, terminal_id=made.terminal_id)
            status = out.exit_status
            record("terminal_killed", signal=status.signal if status else None)
            return "cancelled"
        elif "[run " in text:
            command = text.split("[run ", 1)[1].split("]", 1)[0]
            cwd = text.split("[in ", 1)[1].split("]", 1)[0] if "[in " in text else None
            made = await self.conn.create_terminal(
                session_id=session_id, command="sh", args=["-c", command], cwd=cwd,
                env=[schema.EnvVariable(name="GREETING", value="hello")],
            )  # fmt: skip
            ended = await self.conn.wait_for_terminal_exit(
                session_id=session_id, terminal_id=made.terminal_id
            )
            out = await self.conn.terminal_output(
                session_id=session_id, terminal_id=made.terminal_id
            )
            await self.conn.release_terminal(session_id=session_id, terminal_id=made.terminal_id)
            await say(f"exit {ended.exit_code} {ended.signal}: {out.output.strip()}")
        elif "[die]" in text:
            await say("about to ")
            sys.stderr.write("the test agent dies on purpose\n")
            sys.stderr.flush()
            record("exit", status=3)
            os._exit(3)
        elif "[garbage]" in text:
            await _raw(b"this is not JSON\n")
            await _raw(b'{"pad": "' + b"x" * (9 * 1024 * 1024) + b'"}\n')
            await _raw(b'{"jsonrpc": "2.0", "id": "x-1", "method": "bogus/method"}\n')
            await _raw(b'{"jsonrpc": "2.0", "method": "bogus/notice", "params": {}}\n')
            await say("still here")
        elif "[refuse]" in text:
            return "refusal"
        elif "[recall]" in text:
            await say(" | ".join([*history, whole]))
        else:
            await say(f"echo: {whole}")
        return "end_turn"

    async def _ask(self, session_id: str, kind: str) -> str:
        options = [
            schema.PermissionOption(option_id="yes", name="Allow once", kind="allow_once"),
            schema.PermissionOption(option_id="always", name="Always", kind="allow_always"),
            schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        tool = schema.ToolCallUpdate(tool_call_id="p1", title=f"a {kind} tool", kind=kind)
        answer = await self.conn.request_permission(
            session_id=session_id, tool_call=tool, options=options
        )
        outcome = answer.outcome
        said = getattr(outcome, "option_id", None) or outcome.outcome
        record("permission", kind=kind, outcome=said)
        return str(said)


async def _raw(data: bytes) -> None:
    """Write past the SDK, straight to stdout (non-blocking under asyncio: in pieces)."""
    while data:
        try:
            data = data[os.write(1, data) :]
        except BlockingIOError:
            await asyncio.sleep(0.001)


async def _cancelled_within(cancelled: asyncio.Event, seconds: float) -> bool:
    try:
        await asyncio.wait_for(cancelled.wait(), seconds)
    except TimeoutError:
        return False
    return True


def _fs(capabilities: Any) -> dict[str, bool]:
    fs = getattr(capabilities, "fs", None)
    return {
        "read": bool(getattr(fs, "read_text_file", False)),
        "write": bool(getattr(fs, "write_text_file", False)),
    }


def _save(session_id: str, prompts: list[str]) -> None:
    SESSIONS.mkdir(exist_ok=True)
    (SESSIONS / f"{session_id}.json").write_text(json.dumps(prompts))


def _load(session_id: str) -> list[str] | None:
    path = SESSIONS / f"{Path(session_id).name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--auth")
    parser.add_argument("--no-load", action="store_true")
    parser.add_argument("--start", choices=["exit", "old", "garbage"])
    args = parser.parse_args()
    if args.start == "exit":
        sys.stderr.write("boom: no licence for this machine\n")
        sys.exit(3)
    if args.start == "garbage":
        sys.stdout.write("Welcome to the test agent!\n")
        sys.stdout.flush()
        time.sleep(30)
        return
    agent = TestAgent(args.auth, not args.no_load)
    if args.start == "old":

        async def old(protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
            return schema.InitializeResponse(protocol_version=2)

        agent.initialize = old  # type: ignore[method-assign]
    asyncio.run(acp.run_agent(agent))


if __name__ == "__main__":
    main()
