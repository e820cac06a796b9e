"""The command adapter: one run of a command per message, in its own process group.

The message's text goes to the command's stdin; what it prints on stdout
(stripped) is the reply. The command runs through `run_command`, so an
interrupt or stop ends its whole process tree — SIGTERM, then SIGKILL after
`Policy.subprocess_kill_grace` — and nothing is posted for that message.

Settings (`command()`, for `band-trio agent --adapter band_trio.adapters:command`):

| variable           | meaning                                                     |
|--------------------|-------------------------------------------------------------|
| `BAND_COMMAND`     | required: the command line, split like a shell (`shlex`), no shell run |
| `BAND_COMMAND_CWD` | optional: the directory it runs in (default: the agent's)  |

The command sees the agent's environment plus, for the message it answers,
`BAND_MESSAGE_ID`, `BAND_ROOM_ID` and `BAND_SENDER_ID`. A nonzero exit fails
the message (`CommandFailedError`, labelled with the status and the last line of
stderr); an empty stdout is answered with a short note, and output past the
capture limit (1 MiB) is cut, saying so.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
from collections.abc import Mapping, Sequence

from .. import errors
from ..contract import Adapter, CommandResult, Turn, run_command

__all__ = ["CommandAdapter", "CommandFailedError", "command"]

EMPTY_REPLY = "(the command printed nothing)"
CUT_NOTE = "\n[output cut: {dropped} more bytes were not kept]"


class CommandFailedError(errors.BandTrioError):
    """The command exited with a nonzero status, or was killed by a signal."""

    def __init__(self, result: CommandResult) -> None:
        super().__init__(_label(result))
        self.result = result


class CommandAdapter(Adapter):
    """Runs `argv` for each message: the text on stdin, stdout as the reply."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not argv:
            raise errors.ConfigurationError("the command adapter needs a command")
        self.argv = tuple(argv)
        self.cwd = cwd
        self.env = env
        """The command's base environment (None: the agent's, read at each run)."""

    async def on_turn(self, turn: Turn) -> None:
        message = turn.message
        env = {
            **(os.environ if self.env is None else self.env),
            "BAND_MESSAGE_ID": message.id,
            "BAND_ROOM_ID": message.room_id,
            "BAND_SENDER_ID": message.sender_id,
        }
        result = await run_command(
            turn,
            self.argv,
            input=message.content.encode(),
            cwd=self.cwd,
            env=env,
            name=f"command {os.path.basename(self.argv[0])}",
        )
        if result.returncode != 0:
            raise CommandFailedError(result)
        text = result.stdout.decode(errors="replace").strip()
        if result.stdout_dropped:
            text += CUT_NOTE.format(dropped=result.stdout_dropped)
        await turn.reply(text or EMPTY_REPLY)


def command() -> CommandAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:command`).

    Raises `ConfigurationError` if `BAND_COMMAND` is missing, blank or not valid
    shell syntax, if its executable is not found (on `PATH`, or as a path), or
    if `BAND_COMMAND_CWD` is not a directory."""
    line = os.environ.get("BAND_COMMAND", "")
    if not line.strip():
        raise errors.ConfigurationError("BAND_COMMAND is not set: the command to run per message")
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise errors.ConfigurationError(f"BAND_COMMAND cannot be split: {exc}") from exc
    cwd = os.environ.get("BAND_COMMAND_CWD") or None
    if cwd is not None and not os.path.isdir(cwd):
        raise errors.ConfigurationError(f"BAND_COMMAND_CWD is not a directory: {cwd!r}")
    executable = argv[0]
    if os.sep in executable and cwd is not None:  # a relative path runs from the cwd
        executable = os.path.join(cwd, executable)
    if shutil.which(executable) is None:
        where = "is not an executable file" if os.sep in argv[0] else "is not found on PATH"
        raise errors.ConfigurationError(f"BAND_COMMAND: {argv[0]!r} {where}")
    return CommandAdapter(argv, cwd=cwd)


def _label(result: CommandResult) -> str:
    """A short label of a failed run: how it ended, and the last line it wrote to stderr."""
    code = result.returncode
    if code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exited with status {code}"
    lines = result.stderr.decode(errors="replace").strip().splitlines()
    return f"command {how}: {lines[-1][:120]}" if lines else f"command {how}"
