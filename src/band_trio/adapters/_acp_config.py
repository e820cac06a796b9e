"""The ACP adapter's settings: one frozen object, checked when it is made.

    config = AcpConfig(command=("opencode", "acp"), working_directory="/srv/project")
    config = AcpConfig.from_env()          # BAND_ACP_* (see `from_env`)

Safe by default: every permission the agent asks for (`session/request_permission`)
is refused unless the tool's kind is in `allow`; the client capabilities that let
an agent act through band-trio (`fs/read_text_file`, `fs/write_text_file`,
`terminal/*`) are not advertised unless named in `fs` or `terminal`, and then
confined to `working_directory`. The
agent gets the agent's environment without its `BAND_*` variables (the Band key).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .._ranges import count, read_number, seconds
from ..errors import ConfigurationError
from ._permission_desk import PERMISSION_MODES

__all__ = ["FS_ACCESS", "PERMISSION_MODES", "TOOL_KINDS", "AcpConfig"]

TOOL_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"}
)
"""The kinds of tool call ACP names (`ToolKind`): what a permission request is about."""

FS_ACCESS = frozenset({"read", "write"})
"""The file-system methods band-trio can offer an agent (`fs/read_text_file`, ...)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AcpConfig:
    """Everything the ACP adapter and the agent process it runs are told; see the module."""

    command: tuple[str, ...]
    """The agent's command line, run without a shell (`opencode acp`, `gemini --acp`)."""
    working_directory: str
    """The folder the agent runs in and its sessions work in (`cwd`: absolute, existing)."""
    auth_method: str | None = None
    """The `authenticate` method to use when the agent lists any (Gemini CLI: the
    `gemini-api-key` method); None: no `authenticate` is sent."""
    allow: frozenset[str] = frozenset()
    """Tool kinds whose permission requests are granted (`TOOL_KINDS`); every other
    request is refused (or, with `permissions="ask"`, put to the room). Empty by
    default: the agent may answer, not act."""
    permissions: str = "allow-list"
    """`allow-list` (the default): a request whose kind is not in `allow` is refused.
    `ask`: it is put to the room (`Turn.ask`: the sender of the turn's message picks
    `allow`, `always`, `never` or `deny`; no answer in time is `deny`). Not the
    default: asking hands the operator's decision — a command run on this host — to
    whoever sent the message."""
    ask_within: float | None = None
    """Seconds the room has to answer a permission question (None: `Policy.ask_timeout`)."""
    fs: frozenset[str] = frozenset()
    """File access offered to the agent (`FS_ACCESS`), inside `working_directory` only."""
    terminal: bool = False
    """Whether the agent may run commands through band-trio (`terminal/*`), in
    `working_directory` or a folder inside it; off by default."""
    state_file: str | None = None
    """Where the room → session map is kept (JSON), so that a restarted agent resumes
    each room's session (`session/load`, where the agent supports it); None: in memory,
    for this run only."""
    history: int = 20
    """The room's recent messages given to a new session with its first prompt."""
    start_deadline: float = 60.0
    """Seconds from starting the agent to its `initialize` (and `authenticate`) answered
    (`opencode acp` took 1.35 s here)."""
    request_deadline: float = 60.0
    """Seconds a session call (`session/new`, `session/load`) may take: a new session
    may start the agent's MCP servers."""
    kill_grace: float = 2.0
    """Seconds from SIGTERM to the agent's process group to SIGKILL, when it is stopped."""
    max_frame_bytes: int = 8 * 1024 * 1024
    """The longest line read from the agent; longer ones are skipped, counted, logged."""
    max_file_bytes: int = 1024 * 1024
    """The largest file `fs/read_text_file` reads, or `fs/write_text_file` writes."""
    outbox: int = 64
    """Messages queued for the agent's stdin at most (and its requests handled at once)."""
    stderr_tail: int = 8 * 1024
    """Bytes of the agent's stderr kept to explain why it exited."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "allow", parse_set(self.allow))
        object.__setattr__(self, "fs", parse_set(self.fs))
        if not self.command or not self.command[0].strip():
            raise ConfigurationError("the ACP agent's command must not be empty")
        if not os.path.isabs(self.working_directory):
            raise ConfigurationError(
                f"the ACP working directory must be an absolute path, not "
                f"{self.working_directory!r}"
            )
        if not os.path.isdir(self.working_directory):
            raise ConfigurationError(
                f"the ACP working directory {self.working_directory!r} is not a folder"
            )
        for what, chosen, known in (
            ("tool kind", self.allow, TOOL_KINDS),
            ("fs", self.fs, FS_ACCESS),
        ):
            unknown = set(chosen) - known
            if unknown:
                raise ConfigurationError(
                    f"unknown ACP {what}(s) {sorted(unknown)}; known: {', '.join(sorted(known))}"
                )
        if self.permissions not in PERMISSION_MODES:
            raise ConfigurationError(
                f"the ACP permissions must be one of {PERMISSION_MODES}, not {self.permissions!r}"
            )
        if self.ask_within is not None and not self.ask_within > 0:
            raise ConfigurationError("ask_within must be a positive number of seconds")
        if self.state_file is not None and not os.path.isabs(self.state_file):
            raise ConfigurationError(f"the ACP state file must be absolute: {self.state_file!r}")
        if self.history < 0:
            raise ConfigurationError("history must not be negative")
        for name in ("start_deadline", "request_deadline", "kill_grace"):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds")
        for name in ("max_frame_bytes", "max_file_bytes", "outbox", "stderr_tail"):
            if getattr(self, name) < 1:
                raise ConfigurationError(f"{name} must be at least 1")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AcpConfig:
        """The settings from `BAND_ACP_*`:

        | variable | |
        |---|---|
        | `BAND_ACP_COMMAND` | required: the command, split with `shlex`, run with no shell |
        | `BAND_ACP_CWD` | the working directory, absolute (default: the current one) |
        | `BAND_ACP_AUTH_METHOD` | the `authenticate` method (default: none sent) |
        | `BAND_ACP_ALLOW` | tool kinds to grant, comma-separated (default none) |
        | `BAND_ACP_PERMISSIONS` | `allow-list` (default: refuse the rest) or `ask` (the room) |
        | `BAND_ACP_ASK_WITHIN` | seconds to answer a permission question (default: the policy's) |
        | `BAND_ACP_FS` | `read`, `write` or `read,write`, in the working directory (default none) |
        | `BAND_ACP_TERMINAL` | `on` offers `terminal/*`, in the working directory (default `off`) |
        | `BAND_ACP_STATE` | the room → session map's JSON file, absolute (default: memory) |
        | `BAND_ACP_HISTORY` | recent messages given to a new session (default 20) |

        Raises `ConfigurationError`, naming the variable, for a missing or bad one."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(f"BAND_ACP_{name}", "").strip()
            return value or None

        line = get("COMMAND")
        if line is None:
            raise ConfigurationError(
                "BAND_ACP_COMMAND is required: the ACP agent's command, e.g. `opencode acp`"
            )
        try:
            command = shlex.split(line)
        except ValueError as exc:
            raise ConfigurationError(f"BAND_ACP_COMMAND cannot be split: {exc}") from None
        within = get("ASK_WITHIN")
        ask_within = (
            None
            if within is None
            else read_number("BAND_ACP_ASK_WITHIN", within, seconds(86_400, above=True))
        )
        history = read_number("BAND_ACP_HISTORY", get("HISTORY") or "20", count(1000, low=0))
        try:
            return cls(
                command=tuple(command),
                working_directory=get("CWD") or os.getcwd(),
                auth_method=get("AUTH_METHOD"),
                allow=parse_set(get("ALLOW") or ""),
                permissions=(get("PERMISSIONS") or "allow-list").lower(),
                ask_within=ask_within,
                fs=parse_set(get("FS") or ""),
                terminal=_on_off("BAND_ACP_TERMINAL", get("TERMINAL")),
                state_file=get("STATE"),
                history=int(history),
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"BAND_ACP_*: {exc}") from None


def _on_off(name: str, value: str | None) -> bool:
    text = (value or "off").lower()
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise ConfigurationError(f"{name} must be on or off, not {value!r}")


def parse_set(text: str | Iterable[str]) -> frozenset[str]:
    """`"execute, read"` → {"execute", "read"}; `""` and `"none"` name nothing."""
    items = text.split(",") if isinstance(text, str) else text
    names = {item.strip().lower() for item in items if item.strip()}
    return frozenset(names - {"none"})
