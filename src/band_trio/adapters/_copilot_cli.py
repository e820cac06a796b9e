"""`CopilotCli`: the Copilot CLI process, owned for a run and started again after a crash.

    cli = CopilotCli(config)
    async with cli.running():               # owns the process and the tasks serving it
        connection = await cli.connection() # the live CLI, started (again) if need be
        ...

A `_stdio_child.Supervisor`: `running()` starts the CLI in the background, the
first `connection()` waits for it (under `config.start_deadline`), a CLI that
exits on its own (a crash, a kill -9) is reaped and started again at the next
`connection()`, and leaving `running()` ends its process group (SIGTERM, SIGKILL
after `config.kill_grace`). What is the CLI's own: it is spawned in its working
folder with an environment of its own — `PATH`, `HOME`/`COPILOT_HOME` set to its
state folder, `COPILOT_OFFLINE=true` and the BYOK provider, telemetry and updates
off, nothing of the agent's own environment (no key of the agent's, no
`GITHUB_TOKEN`) — it speaks JSON-RPC framed with `Content-Length` headers
(`_rpc_codecs`), and its handshake, `connect`, must answer protocol version 3.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Any

from ._copilot_config import CopilotConfig
from ._copilot_errors import CopilotError, CopilotGone, CopilotRpcError
from ._copilot_session import Session
from ._rpc_codecs import ContentLengthCodec
from ._stdio_child import Connection as ChildConnection
from ._stdio_child import Supervisor
from ._stdio_process import ChildProcess, spawn

__all__ = ["PROTOCOL_VERSION", "Connection", "CopilotCli"]

log = logging.getLogger("band_trio.adapters.copilot")

PROTOCOL_VERSION = 3
"""The CLI's SDK protocol version this client speaks (permission requests as events)."""

WHAT = "the Copilot CLI"


class Connection(ChildConnection):
    """One running CLI: its process, its JSON-RPC peer and the sessions opened on it.
    The CLI's own requests are refused: its sessions ask for none."""

    def __init__(self, process: ChildProcess, config: CopilotConfig, number: int) -> None:
        super().__init__(
            process,
            ContentLengthCodec(config.max_frame_bytes),
            number=number,
            outbox=config.outbox,
            gone=CopilotGone,
            refused=CopilotRpcError,
        )
        self.sessions: dict[str, Session] = {}
        self.version = ""
        self.steers = True
        """It takes `session.send` with `mode: "immediate"` (False once it refused it:
        guidance is then not taken while this process runs)."""

    def open_session(self, session: Session) -> None:
        self.sessions[session.id] = session
        if not self.alive:
            session.end(self.rpc.reason)

    def notified(self, method: str, params: dict[str, Any]) -> None:
        if method != "session.event":
            return  # session.lifecycle and others: nothing here needs them
        session = self.sessions.get(str(params.get("sessionId")))
        event = params.get("event")
        if session is not None and isinstance(event, dict):
            session.feed(event)

    async def handshake(self) -> None:
        answer = await self.request("connect", {"supportedTaskKinds": []})
        version = answer.get("protocolVersion") if isinstance(answer, dict) else None
        if version != PROTOCOL_VERSION:
            raise CopilotError(
                f"the Copilot CLI speaks SDK protocol {version!r}; band-trio speaks "
                f"{PROTOCOL_VERSION} (Copilot CLI 1.0.102)"
            )
        self.version = str(answer.get("version", "?"))

    def closed(self, reason: str) -> None:
        for session in self.sessions.values():
            session.end(reason)


class CopilotCli(Supervisor[Connection]):
    """The Copilot CLI process, owned by `running()`; see the module."""

    def __init__(self, config: CopilotConfig) -> None:
        super().__init__(
            what=WHAT,
            start_deadline=config.start_deadline,
            kill_grace=config.kill_grace,
            error=CopilotError,
            log=log,
        )
        self.config = config
        self._made: list[str] = []
        """Folders made for this run (at the first start), removed when it ends."""
        self.home = config.home or ""
        self.working_directory = config.working_directory or ""
        """The folders of the current run (made at its first start unless the config
        names them; a SIGKILLed agent cannot remove them: they are in the temp dir)."""

    def begin(self) -> None:
        self._made = []
        self.home = self.config.home or ""
        self.working_directory = self.config.working_directory or ""

    def prepare(self) -> None:
        if not self.home:  # made at the first start: a run that needs no CLI leaves none
            self.home = _folder("home", self._made)
        if not self.working_directory:
            self.working_directory = _folder("work", self._made)

    def cleanup(self) -> None:
        for folder in self._made:
            shutil.rmtree(folder, ignore_errors=True)
        self._made = []

    async def launch(self, number: int) -> Connection:
        process = await spawn(
            _argv(self.config),
            cwd=self.working_directory,
            env=_environment(self.config, self.home),
            stderr_tail=self.config.stderr_tail,
            what=WHAT,
        )
        return Connection(process, self.config, number)

    def started(self, connection: Connection) -> None:
        log.info(
            "Copilot CLI %s started (pid %d, in %s)",
            connection.version,
            connection.pid,
            self.working_directory,
        )


def _folder(what: str, made: list[str]) -> str:
    folder = tempfile.mkdtemp(prefix=f"band-trio-copilot-{what}-")
    made.append(folder)
    return folder


def _argv(config: CopilotConfig) -> list[str]:
    return [
        config.cli,
        "--headless",
        "--stdio",
        "--no-auto-update",
        "--no-auto-login",
        "--disable-builtin-mcps",
        "--disallow-temp-dir",
        "--log-level",
        "error",
    ]


def _environment(config: CopilotConfig, home: str) -> dict[str, str]:
    """The CLI's whole environment: nothing of the agent's but `PATH` and the locale."""
    env = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL") if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(
        {
            "HOME": home,
            "COPILOT_HOME": home,
            "COPILOT_OFFLINE": "true",  # no GitHub auth, telemetry, web tools or updates
            "COPILOT_PROVIDER_BASE_URL": config.base_url,
            "COPILOT_PROVIDER_TYPE": config.provider_type,
            "COPILOT_PROVIDER_WIRE_API": config.wire_api,
            "COPILOT_MODEL": config.model,
            "COPILOT_GITHUB_TELEMETRY_DISABLED": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_SKIP_CLI_DOWNLOAD": "1",
            "COPILOT_DISABLE_KEYTAR": "1",
            "NO_COLOR": "1",
        }
    )
    return env
