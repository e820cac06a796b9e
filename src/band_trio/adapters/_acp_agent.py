"""`AcpAgent`: the ACP agent process, owned for a run and started again after a crash.

    agent = AcpAgent(config)
    async with agent.running():                  # owns the process and its tasks
        connection = await agent.connection()    # the live agent, started (again)
        ...

A `_stdio_child.Supervisor` (the Copilot CLI's too): the command runs without a
shell in `config.working_directory`, leading a process group of its own, with
the agent's environment less its `BAND_*` variables; it speaks JSON-RPC one
message a line (`_rpc_codecs.LineCodec`). Its handshake is `initialize`
(protocol version 1, the client capabilities the config offers), then
`authenticate` with `config.auth_method` when the agent lists methods and one is
configured (Gemini CLI wants `gemini-api-key` before `session/new`; OpenCode
lists a login it does not need).

Its requests are each answered in a task of their own (`_jsonrpc`):
`session/request_permission` by the policy (`_acp_permissions`: the allow-list, or
the room when configured to ask; a request of a prompt being cancelled is answered
`cancelled`), `fs/read_text_file` and
`fs/write_text_file` only when offered, inside the working directory (the path
resolved, symbolic links included), up to `config.max_file_bytes`. Any other
method is refused (-32601); a line that is not JSON, or too long, is counted and
skipped, never a crash.
"""

from __future__ import annotations

import logging
import os
from importlib import metadata
from typing import Any

import trio

from ..errors import UpstreamError
from ._acp_config import AcpConfig
from ._acp_permissions import answer_permission
from ._acp_session import Session
from ._acp_terminals import Terminals, confined
from ._jsonrpc import RpcFault
from ._rpc_codecs import LineCodec
from ._stdio_child import Connection, Supervisor
from ._stdio_process import ChildProcess, spawn

__all__ = ["PROTOCOL_VERSION", "AcpAgent", "AcpConnection", "AcpError", "AcpGone", "AcpRpcError"]

log = logging.getLogger("band_trio.adapters.acp")

PROTOCOL_VERSION = 1
"""The ACP major version band-trio speaks (the one OpenCode and Gemini CLI speak)."""

WHAT = "the ACP agent"


class AcpError(UpstreamError):
    """The ACP agent could not be started, refused a call, failed a prompt or exited."""


class AcpRpcError(AcpError):
    """The agent answered a call with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method} answered error {code}: {message[:300]}")
        self.method = method
        self.code = code


class AcpGone(AcpError):
    """The connection to the agent is closed (the process exited, or is being stopped)."""


class AcpConnection(Connection):
    """One running agent: its process, its JSON-RPC peer, and the sessions opened on it."""

    handles_requests = True

    def __init__(self, process: ChildProcess, config: AcpConfig, number: int) -> None:
        super().__init__(
            process,
            LineCodec(config.max_frame_bytes),
            number=number,
            outbox=config.outbox,
            gone=AcpGone,
            refused=AcpRpcError,
        )
        self.config = config
        self.sessions: dict[str, Session] = {}
        self.load_session = False
        """The agent can `session/load` a session of an earlier process."""
        self.agent = "?"
        """The agent's name and version, as it said (`agentInfo`)."""
        self.terminals = Terminals(config)
        """The commands it runs through band-trio (`terminal/*`, when offered)."""

    async def serve(self) -> None:
        """The connection's tasks, and its terminals: those still running end with it."""
        async with self.terminals.serving():
            await super().serve()

    def notified(self, method: str, params: dict[str, Any]) -> None:
        if method != "session/update":
            return  # $/cancel_request (for requests answered at once) and the like
        session = self.sessions.get(str(params.get("sessionId")))
        update = params.get("update")
        if session is not None and isinstance(update, dict):
            session.feed(update)

    async def requested(self, method: str, params: dict[str, Any]) -> Any:
        session = self.sessions.get(str(params.get("sessionId")))
        if method == "session/request_permission":
            asks = self.config.permissions == "ask"
            return await answer_permission(session, params, self.config.allow, asks=asks)
        if method.startswith("terminal/") and self.config.terminal:
            if session is None:
                raise RpcFault(-32602, "no such session")
            verb = method.removeprefix("terminal/")
            if verb == "create":
                created = await self.terminals.create(params)
                log.info("room %s: the agent runs %s", session.room_id, _command(params))
                return created
            if verb in ("output", "wait_for_exit", "kill", "release"):
                return await getattr(self.terminals, verb)(params)
        access = {"fs/read_text_file": "read", "fs/write_text_file": "write"}.get(method)
        if access is None or access not in self.config.fs:
            raise RpcFault(-32601, f"band-trio does not offer {method}")
        if session is None:
            raise RpcFault(-32602, "no such session")
        path = confined(params.get("path"), self.config.working_directory)
        if access == "read":
            return {"content": await _read(path, params, self.config.max_file_bytes)}
        await _write(path, params.get("content"), self.config.max_file_bytes)
        log.info("room %s: the agent wrote %s", session.room_id, path)
        return None

    async def handshake(self) -> None:
        fs = self.config.fs
        answer = await self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": "read" in fs, "writeTextFile": "write" in fs},
                    "terminal": self.config.terminal,
                },
                "clientInfo": {"name": "band-trio", "title": "band-trio", "version": _version()},
            },
        )
        if not isinstance(answer, dict) or answer.get("protocolVersion") != PROTOCOL_VERSION:
            said = answer.get("protocolVersion") if isinstance(answer, dict) else answer
            raise AcpError(
                f"the agent speaks ACP protocol {said!r:.60}; band-trio speaks {PROTOCOL_VERSION}"
            )
        capabilities = answer.get("agentCapabilities")
        capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.load_session = capabilities.get("loadSession") is True
        info = answer.get("agentInfo")
        if isinstance(info, dict):
            self.agent = f"{info.get('name', '?')} {info.get('version', '')}".strip()
        methods = [m.get("id") for m in answer.get("authMethods") or () if isinstance(m, dict)]
        wanted = self.config.auth_method
        if methods and wanted is not None:
            if wanted not in methods:
                raise AcpError(f"the agent offers no auth method {wanted!r}; it offers {methods}")
            await self.request("authenticate", {"methodId": wanted})

    def closed(self, reason: str) -> None:
        for session in self.sessions.values():
            session.answer = None


class AcpAgent(Supervisor[AcpConnection]):
    """The ACP agent process, owned by `running()`; see the module."""

    def __init__(self, config: AcpConfig) -> None:
        super().__init__(
            what=WHAT,
            start_deadline=config.start_deadline,
            kill_grace=config.kill_grace,
            error=AcpError,
            log=log,
        )
        self.config = config

    def environment(self) -> dict[str, str]:
        """The agent's whole environment: the agent's less its `BAND_*` variables (the
        Band key, the platform and the adapter's own settings are nothing an agent that
        runs commands should read). A subclass may give it one of its own."""
        return {name: value for name, value in os.environ.items() if not name.startswith("BAND_")}

    async def launch(self, number: int) -> AcpConnection:
        process = await spawn(
            self.config.command,
            cwd=self.config.working_directory,
            env=self.environment(),
            stderr_tail=self.config.stderr_tail,
            what=WHAT,
        )
        return AcpConnection(process, self.config, number)

    def started(self, connection: AcpConnection) -> None:
        log.info(
            "ACP agent %s started (pid %d, in %s)",
            connection.agent,
            connection.pid,
            self.config.working_directory,
        )


def _version() -> str:
    try:
        return metadata.version("band-trio")
    except metadata.PackageNotFoundError:
        return "unknown"


def _command(params: dict[str, Any]) -> str:
    args = params.get("args") if isinstance(params.get("args"), list) else []
    return " ".join([str(params.get("command")), *map(str, args or ())])[:200]


async def _read(path: str, params: dict[str, Any], limit: int) -> str:
    file = trio.Path(path)
    try:
        if (await file.stat()).st_size > limit:
            raise RpcFault(-32602, f"the file is larger than {limit} bytes")
        text = await file.read_text("utf-8", "replace")
    except OSError as exc:
        raise RpcFault(-32002, f"cannot read the file: {exc.strerror}") from None
    line, count = params.get("line"), params.get("limit")
    if isinstance(line, int) or isinstance(count, int):
        lines = text.splitlines(keepends=True)
        first = max(0, line - 1) if isinstance(line, int) else 0
        last = first + count if isinstance(count, int) and count >= 0 else len(lines)
        text = "".join(lines[first:last])
    return text


async def _write(path: str, content: Any, limit: int) -> None:
    if not isinstance(content, str):
        raise RpcFault(-32602, "the content must be text")
    data = content.encode("utf-8")
    if len(data) > limit:
        raise RpcFault(-32602, f"the content is larger than {limit} bytes")
    try:
        await trio.Path(path).write_bytes(data)
    except OSError as exc:
        raise RpcFault(-32002, f"cannot write the file: {exc.strerror}") from None
