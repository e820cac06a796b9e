"""The Copilot adapter's settings: one frozen object, checked when it is made.

    config = CopilotConfig(cli="/opt/copilot/copilot", model="gpt-4o",
                           base_url="http://127.0.0.1:11434/v1")
    config = CopilotConfig.from_env()          # BAND_COPILOT_* (see `from_env`)

Only BYOK ("bring your own key") is supported: the CLI talks to the model server
named here and runs with `COPILOT_OFFLINE=true`, so it needs no GitHub login and
reaches nothing else (no GitHub authentication, telemetry, web tools, GitHub MCP
server or update check). Every setting that would make the CLI act on the host
is off unless named: each tool permission the CLI asks for is denied unless its
kind is in `allow`, and the CLI works in a folder of its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .._ranges import count, read_number, seconds
from ..errors import ConfigurationError
from ._permission_desk import PERMISSION_MODES

__all__ = ["PERMISSION_KINDS", "CopilotConfig"]

PERMISSION_KINDS = frozenset(
    {
        "shell",
        "write",
        "read",
        "url",
        "mcp",
        "memory",
        "custom-tool",
        "hook",
        "workflow",
        "extension-management",
        "extension-permission-access",
        "extension-env-access",
    }
)
"""The kinds of tool permission the Copilot CLI (1.0.102, protocol 3) asks for: run a
shell command, write a file, read a file outside the working folder, fetch a URL, call
an MCP tool, write a memory, run a custom tool or a hook, ..."""

PROVIDER_TYPES = ("openai", "azure", "anthropic")
WIRE_APIS = ("completions", "responses")


@dataclass(frozen=True, slots=True, kw_only=True)
class CopilotConfig:
    """Everything the Copilot adapter and the CLI it runs are told; see the module."""

    cli: str
    """The Copilot CLI binary (npm `@github/copilot`: its platform package, e.g.
    `node_modules/@github/copilot-linux-x64/copilot`, is a native executable)."""
    model: str
    """The model as the provider names it (`gpt-4o`, `llama3.2`, ...)."""
    base_url: str
    """The provider's API root, e.g. `http://127.0.0.1:11434/v1` (BYOK)."""
    api_key: str | None = field(default=None, repr=False)
    """Sent to the provider as `Bearer`; given to the CLI per session, never in its
    environment (where a shell command it ran could read it)."""
    provider_type: str = "openai"
    """`openai` (any OpenAI-compatible server), `azure` or `anthropic`."""
    wire_api: str = "completions"
    """`completions` (chat completions) or `responses` (the Responses API)."""
    working_directory: str | None = None
    """The folder the CLI and its sessions work in (absolute, existing). None: a new
    temporary folder for each run of the adapter, removed after it."""
    home: str | None = None
    """The CLI's own state (`COPILOT_HOME` and `HOME`: its config, logs and session
    history). None: a new temporary folder for each run, removed after it."""
    allow: frozenset[str] = frozenset()
    """Tool permission kinds granted when the CLI asks (see `PERMISSION_KINDS`); every
    other request is denied (or, with `permissions="ask"`, put to the room). Empty by
    default: the model can answer, not act."""
    permissions: str = "allow-list"
    """`allow-list` (the default): a request whose kind is not in `allow` is denied.
    `ask`: it is put to the room (`Turn.ask`: the sender of the turn's message picks
    `allow` or `deny`; no answer in time is `deny`). Not the default: asking hands the
    operator's decision — a command run on this host — to whoever sent the message."""
    ask_within: float | None = None
    """Seconds the room has to answer a permission question (None: `Policy.ask_timeout`)."""
    max_retries: int = 2
    """Failed model calls the CLI may retry for one message before the message fails
    (the CLI retries five times with backoff, about 15 s, on its own)."""
    start_deadline: float = 60.0
    """Seconds from starting the CLI to its handshake answered (a cold start of the
    197 MB binary took 3 s here)."""
    request_deadline: float = 30.0
    """Seconds a session call (create, resume, detach) may take."""
    kill_grace: float = 2.0
    """Seconds from SIGTERM to the CLI's process group to SIGKILL, when it is stopped."""
    max_frame_bytes: int = 8 * 1024 * 1024
    """The largest JSON-RPC message read from the CLI; larger ones are skipped, counted
    and logged (the CLI sends a snapshot of the whole conversation after each turn)."""
    outbox: int = 64
    """Messages queued for the CLI's stdin at most; a CLI that stops reading them
    blocks new requests (each under its caller's deadline), not the reader."""
    stderr_tail: int = 8 * 1024
    """Bytes of the CLI's stderr kept to explain why it exited."""
    seen_messages: int = 64
    """User message ids (with their ends and errors) one run remembers at most: its own
    is among the first, and a CLI that sends more cannot grow the run without bound."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow", parse_allow(self.allow))
        _check_cli(self.cli)
        if not self.model.strip():
            raise ConfigurationError("the Copilot model must not be blank")
        if not re.match(r"^https?://[^/\s]+", self.base_url):
            raise ConfigurationError(
                f"the Copilot provider URL must be http(s)://host[:port]/..., not {self.base_url!r}"
            )
        _one_of("provider type", self.provider_type, PROVIDER_TYPES)
        _one_of("wire API", self.wire_api, WIRE_APIS)
        for name in ("working_directory", "home"):
            folder = getattr(self, name)
            if folder is not None:
                _check_folder(name.replace("_", " "), folder)
        unknown = set(self.allow) - PERMISSION_KINDS
        if unknown:
            raise ConfigurationError(
                f"unknown Copilot permission kind(s) {sorted(unknown)}; "
                f"known: {', '.join(sorted(PERMISSION_KINDS))}"
            )
        if self.permissions not in PERMISSION_MODES:
            raise ConfigurationError(
                f"the Copilot permissions must be one of {PERMISSION_MODES}, "
                f"not {self.permissions!r}"
            )
        if self.ask_within is not None and not self.ask_within > 0:
            raise ConfigurationError("ask_within must be a positive number of seconds")
        if self.max_retries < 0:
            raise ConfigurationError("max_retries must not be negative")
        for name in ("start_deadline", "request_deadline", "kill_grace"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds")
        for name in ("max_frame_bytes", "outbox", "stderr_tail", "seen_messages"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CopilotConfig:
        """The settings from `BAND_COPILOT_*`:

        | variable | |
        |---|---|
        | `BAND_COPILOT_CLI` | the CLI binary (default: `copilot` on `PATH`) |
        | `BAND_COPILOT_MODEL` | required |
        | `BAND_COPILOT_BASE_URL` | required: the provider's API root |
        | `BAND_COPILOT_API_KEY` | optional |
        | `BAND_COPILOT_PROVIDER` | `openai` (default), `azure`, `anthropic` |
        | `BAND_COPILOT_WIRE_API` | `completions` (default), `responses` |
        | `BAND_COPILOT_WORKDIR` | an absolute, existing folder (default: a new one per run) |
        | `BAND_COPILOT_HOME` | the CLI's state folder (default: a new one per run) |
        | `BAND_COPILOT_ALLOW` | permission kinds to grant, comma-separated (default none) |
        | `BAND_COPILOT_PERMISSIONS` | `allow-list` (default: deny the rest) or `ask` (the room) |
        | `BAND_COPILOT_ASK_WITHIN` | seconds to answer a permission question (default: policy) |
        | `BAND_COPILOT_MAX_RETRIES` | default 2 |

        Raises `ConfigurationError`, naming the variable, for a missing or bad one."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(f"BAND_COPILOT_{name}", "").strip()
            return value or None

        cli = get("CLI") or _on_path("copilot")
        model, base_url = get("MODEL"), get("BASE_URL")
        if model is None or base_url is None:
            missing = [n for n, v in (("MODEL", model), ("BASE_URL", base_url)) if v is None]
            raise ConfigurationError(
                f"BAND_COPILOT_{missing[0]} is required (the Copilot adapter runs only with a "
                "provider of your own: BAND_COPILOT_BASE_URL and BAND_COPILOT_MODEL)"
            )
        retries = read_number(
            "BAND_COPILOT_MAX_RETRIES", get("MAX_RETRIES") or "2", count(100, low=0)
        )
        within = get("ASK_WITHIN")
        ask_within = (
            None
            if within is None
            else read_number("BAND_COPILOT_ASK_WITHIN", within, seconds(86_400, above=True))
        )
        try:
            return cls(
                cli=cli,
                model=model,
                base_url=base_url,
                api_key=get("API_KEY"),
                provider_type=get("PROVIDER") or "openai",
                wire_api=get("WIRE_API") or "completions",
                working_directory=get("WORKDIR"),
                home=get("HOME"),
                allow=parse_allow(get("ALLOW") or ""),
                permissions=(get("PERMISSIONS") or "allow-list").lower(),
                ask_within=ask_within,
                max_retries=int(retries),
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"BAND_COPILOT_*: {exc}") from None


def parse_allow(text: str | Iterable[str]) -> frozenset[str]:
    """`"shell, read"` → {"shell", "read"}; `""` and `"none"` grant nothing."""
    items = text.split(",") if isinstance(text, str) else text
    kinds = {item.strip().lower() for item in items if item.strip()}
    return frozenset(kinds - {"none"})


def _on_path(name: str) -> str:
    from shutil import which

    found = which(name)
    if found is None:
        raise ConfigurationError(
            "BAND_COPILOT_CLI is not set and no `copilot` is on PATH: install it "
            "(`npm install @github/copilot`) and name its binary, e.g. "
            "node_modules/@github/copilot-linux-x64/copilot"
        )
    return found


def _check_cli(cli: str) -> None:
    path = Path(cli)
    if not path.is_file():
        raise ConfigurationError(f"the Copilot CLI {cli!r} is not a file")
    if not os.access(path, os.X_OK):
        raise ConfigurationError(f"the Copilot CLI {cli!r} is not executable")


def _check_folder(what: str, folder: str) -> None:
    if not os.path.isabs(folder):
        raise ConfigurationError(f"the Copilot {what} must be an absolute path, not {folder!r}")
    if not os.path.isdir(folder):
        raise ConfigurationError(f"the Copilot {what} {folder!r} is not a folder")


def _one_of(what: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigurationError(f"the Copilot {what} must be one of {allowed}, not {value!r}")
