"""What the benchmark driver and the agents under test say to each other.

The driver asks through message text, the agents answer with observation
lines on stdout: one JSON object per line, `{"e": kind, "m": message id,
"t": perf_counter}` (plus `"n"` for a task count). `time.perf_counter()` is
CLOCK_MONOTONIC on Linux, so stamps taken in the agent's process compare
directly with the platform's own log stamps in the driver's process.

This module is imported by both subjects, one of which is asyncio: it uses
the standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass

__all__ = [
    "A2A",
    "ACP",
    "ANTHROPIC",
    "ASK",
    "BUSY",
    "CMD",
    "COPILOT",
    "HOLD",
    "LLM",
    "TASKS",
    "Command",
    "Observation",
    "command_script",
    "exit_with_driver",
    "observe",
    "parse_command",
    "parse_observation",
]

HOLD = "bench hold"
"""Park until cancelled: the turn every signal trial aborts."""
ASK = "bench ask"
"""Ask the room (`Turn.ask`, approve or deny) and wait for the answer, which never comes:
the turn the approval-wait trial interrupts (the band-trio subject only: band-sdk has no
`ask`)."""
BUSY = "bench busy"
"""`bench busy UNTIL`: work until `perf_counter() >= UNTIL`, then reply `ok`."""
TASKS = "bench tasks"
"""Report how many tasks the agent's event loop holds, then reply `ok`."""
LLM = "bench llm"
"""`bench llm BASE_URL PROMPT`: stream a chat completion from an OpenAI-style server."""
A2A = "bench a2a"
"""`bench a2a URL TEXT`: stream an A2A task; an abort cancels it on the peer."""
ANTHROPIC = "bench anthropic"
"""`bench anthropic URL PROMPT`: stream an Anthropic Messages answer with the official SDK
(the band-trio subject only: the driver runs it when the `anthropic` extra is installed)."""
COPILOT = "bench copilot"
"""`bench copilot BASE_URL PROMPT`: a prompt in a Copilot session, with the model
server at BASE_URL (the band-trio subject only: band-sdk has no Copilot adapter)."""

ACP = "bench acp"
"""`bench acp BASE_URL PROMPT`: a prompt in an ACP session of `opencode acp`, whose model
server is BASE_URL (the band-trio subject only)."""

STDOUT = 1

CMD = "bench cmd"
"""`bench cmd FIFO`: run a process group whose pids are written to FIFO; park."""


@dataclass(frozen=True, slots=True)
class Command:
    kind: str
    argument: str = ""

    def split(self) -> tuple[str, str]:
        """`URL REST` arguments (`bench llm`, `bench a2a`)."""
        url, _, rest = self.argument.partition(" ")
        return url, rest


def parse_command(text: str) -> Command | None:
    """The benchmark command in a message's text, or None for anything else."""
    for kind in (HOLD, ASK, BUSY, TASKS, CMD, LLM, A2A, COPILOT, ANTHROPIC, ACP):
        if text == kind or text.startswith(kind + " "):
            return Command(kind, text[len(kind) :].strip())
    return None


@dataclass(frozen=True, slots=True)
class Observation:
    kind: str
    message_id: str
    t: float
    n: int | None = None


def observe(kind: str, message_id: str, n: int | None = None) -> None:
    """Stamp first, then write one line to stdout (a pipe the driver drains).

    One `os.write` of the whole line, past Python's text layer: the write sits on
    the path of what is measured next (the cancel's mark follows it), so it is
    kept as short as a system call allows, alike for both runtimes."""
    t = time.perf_counter()
    line: dict[str, object] = {"e": kind, "m": message_id, "t": t}
    if n is not None:
        line["n"] = n
    os.write(STDOUT, (json.dumps(line) + "\n").encode())


ORPHAN_ENV = "BAND_BENCH_EXIT_WITH_DRIVER"
"""Set by the driver, which holds the write end of the process's stdin."""


def exit_with_driver() -> None:
    """Exit at once when the driver is gone, even killed with SIGKILL.

    The driver keeps our stdin's write end open and never writes; the kernel closes
    it when the driver dies, and the read here sees the end of file. A thread does
    the reading so that neither runtime's event loop is involved. Off unless the
    driver set `ORPHAN_ENV` (a subject started by hand keeps running)."""
    if os.environ.get(ORPHAN_ENV) != "1":
        return

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        os._exit(3)

    threading.Thread(target=watch, name="exit-with-driver", daemon=True).start()


def parse_observation(line: str) -> Observation | None:
    """One observation line, or None if the line is not one (the driver counts those)."""
    try:
        raw = json.loads(line)
        n = raw.get("n")
        return Observation(
            str(raw["e"]), str(raw["m"]), float(raw["t"]), int(n) if n is not None else None
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def command_script(fifo: str) -> list[str]:
    """The process group both runtimes start for `bench cmd`: a shell and a child,
    their pids written to `fifo`, then both parked until a signal ends them."""
    script = f'sleep 3600 & echo "$$ $!" > {_quote(fifo)}; wait'
    return ["/bin/sh", "-c", script]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
