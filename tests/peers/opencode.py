"""OpenCode 1.18.33 (`opencode serve`) as a local test peer, with stubllm as its model.

    from peers import stubllm_peer
    from peers.opencode import opencode_peer

    async def test_something() -> None:
        async with stubllm_peer() as llm, opencode_peer(llm.base_url) as peer:
            ...  # talk to peer.url: POST /session, /session/{id}/prompt_async, GET /event

The binary is the one `python3 dev.py test` installs with npm into `.tools/opencode` (it
passes the path as ``BAND_TRIO_OPENCODE``; without it the install stamp there is read). A
missing binary is a `PeerError` naming the fix: the OpenCode tests fail, they never skip.

Each peer is a fresh server on 127.0.0.1 in a temporary directory of its own, laid out by
`band_trio.bench._opencode_home.opencode_home` (its own HOME and XDG folders, the project
directory it runs in, a minimal environment with nothing of the caller's API keys, stubllm
as the provider ``stub``, and offline on purpose: see there).

The port: ``--port 0`` means "4096, else any free port" in OpenCode, so the address is read
from its ``opencode server listening on http://...`` line, never guessed. It is ready once
``GET /global/health`` answers and ``GET /config/providers`` (which boots the project
instance, about 1 s the first time) lists ``stub``. On exit it gets SIGTERM by its pid, SIGKILL
after ``stop_timeout``, is reaped, and its process group (it runs in a session of its own) and
its port are checked to be gone.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import httpx2
import trio

from band_trio.bench._opencode_home import opencode_home

from .fixtures import POLL_INTERVAL, PeerError, _stop, installed_binary

REPO = Path(__file__).resolve().parents[2]
VERSION = "1.18.33"
STAMP = REPO / ".tools" / "opencode" / ".band-trio-installed"
LISTENING = re.compile(rb"opencode server listening on (http://127\.0\.0\.1:(\d+))")


def opencode_binary() -> Path:
    """The OpenCode binary: ``BAND_TRIO_OPENCODE``, else the one dev.py's stamp names."""
    return installed_binary("BAND_TRIO_OPENCODE", STAMP, VERSION, "opencode-ai")


class OpenCodePeer:
    """A running ``opencode serve``: its address, its directories and its output."""

    def __init__(self, process: trio.Process, root: Path, password: str | None) -> None:
        self.process = process
        self.root = root
        self.password = password
        self.url = ""
        """``http://127.0.0.1:N`` (no trailing slash), once it listens."""
        self.project = root / "project"
        """The directory the server runs in (sessions' ``directory``)."""

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    @property
    def auth(self) -> tuple[str, str] | None:
        """Basic auth for its API (username ``opencode``), if it was given a password."""
        return ("opencode", self.password) if self.password else None

    def output(self) -> str:
        """What it printed (stdout and stderr)."""
        text = ""
        for name in ("stdout", "stderr"):
            with suppress(FileNotFoundError):
                text += (self.root / name).read_text("utf-8", "replace")
        return text

    def log(self) -> str:
        """OpenCode's own log file(s) (``XDG_DATA_HOME/opencode/log``)."""
        logs = sorted((self.root / "data" / "opencode" / "log").glob("*.log"))
        return "".join(p.read_text("utf-8", "replace") for p in logs)

    def diagnostics(self) -> str:
        return f"\n--- output ---\n{self.output()[-3000:]}\n--- log ---\n{self.log()[-3000:]}"


def _layout(
    root: Path, llm_base_url: str, model: str, permission: dict[str, str] | None = None
) -> dict[str, str]:
    """Create the isolated directories and the config; return the server's environment."""
    return opencode_home(root, llm_base_url, model, permission=permission)


async def _wait_ready(peer: OpenCodePeer, limit: float) -> None:
    """Read the address it prints, then wait until its API answers with `stub` loaded."""
    stdout = peer.root / "stdout"
    try:
        with trio.fail_after(limit):
            while not peer.url:
                if peer.process.poll() is not None:
                    raise PeerError(
                        f"opencode exited during startup (rc={peer.process.returncode})"
                        f"{peer.diagnostics()}"
                    )
                found = LISTENING.search(stdout.read_bytes()) if stdout.exists() else None
                if found:
                    peer.url = found.group(1).decode()
                else:
                    await trio.sleep(POLL_INTERVAL)
            # Its first answers wait for the instance's bootstrap, which takes seconds on a
            # loaded machine: the start-up limit bounds them, not httpx2's 5 s default.
            async with httpx2.AsyncClient(
                base_url=peer.url, auth=peer.auth, timeout=limit
            ) as client:
                health = (await client.get("/global/health")).json()
                if health.get("version") != VERSION:
                    raise PeerError(f"opencode at {peer.url} is {health}, not {VERSION}")
                providers = (await client.get("/config/providers")).json()
    except trio.TooSlowError:
        raise PeerError(f"opencode not ready within {limit} s{peer.diagnostics()}") from None
    except httpx2.HTTPError as exc:
        raise PeerError(
            f"opencode at {peer.url} does not answer: {exc!r}{peer.diagnostics()}"
        ) from exc
    ids = [p.get("id") for p in providers.get("providers", [])]
    if "stub" not in ids:
        raise PeerError(f"opencode did not load the stub provider: {ids}{peer.diagnostics()}")


def _left_behind(pgid: int) -> list[int]:
    """Processes still in the server's process group (Linux: read from /proc)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return []
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                found.append(int(stat.parent.name))
    return found or [pgid]


async def _port_open(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return False
    await stream.aclose()
    return True


@asynccontextmanager
async def opencode_peer(
    llm_base_url: str,
    *,
    model: str = "gpt-4o",
    password: str | None = None,
    permission: dict[str, str] | None = None,
    start_timeout: float = 60.0,
    stop_timeout: float = 5.0,
) -> AsyncIterator[OpenCodePeer]:
    """``opencode serve`` on 127.0.0.1 with the provider ``stub`` = ``llm_base_url``.

    ``model`` is the model id it asks stubllm for (the adapter's ``stub/<model>``);
    ``password`` turns on its basic auth (``OPENCODE_SERVER_PASSWORD``, user ``opencode``);
    ``permission`` is its per-tool rules (``{"bash": "ask"}``: each use is asked for).
    Raises `PeerError` (with its output and log) if it cannot be started."""
    binary = opencode_binary()
    root = Path(tempfile.mkdtemp(prefix="band-trio-opencode-"))
    try:
        env = _layout(root, llm_base_url, model, permission)
        if password:
            env["OPENCODE_SERVER_PASSWORD"] = password
        argv = [str(binary), "serve", "--hostname", "127.0.0.1", "--port", "0", "--pure"]
        with (root / "stdout").open("wb") as out, (root / "stderr").open("wb") as err:
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=env,
                cwd=root / "project",
                start_new_session=True,  # its own group: signalled by its pid, checked after
            )
        peer = OpenCodePeer(process, root, password)
        try:
            await _wait_ready(peer, start_timeout)
            yield peer
        finally:
            with trio.CancelScope(shield=True):
                await _stop(process, stop_timeout)
            stray = _left_behind(process.pid)
            for pid in stray:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if stray:
                raise PeerError(f"opencode left processes behind: {stray}{peer.diagnostics()}")
            if peer.url and await _port_open(peer.port):
                raise PeerError(f"opencode's port {peer.port} still accepts connections")
    finally:
        shutil.rmtree(root, ignore_errors=True)
