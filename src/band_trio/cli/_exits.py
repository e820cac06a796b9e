"""The exit statuses of `band-trio`: one convention for every command.

`EXIT_STATUSES` is the text `band-trio --help` ends with; docs/reference/cli.md
holds the same table (a test compares them).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not `typing`'s: `band_trio.cli` imports this before `main` runs
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = [
    "EXIT_CONFIG",
    "EXIT_CRASH",
    "EXIT_DISCONNECTED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PIPE",
    "EXIT_STATUSES",
    "exit_at_once",
    "single",
]

EXIT_OK = 0
"""Done; a server or agent stopped by SIGINT/SIGTERM."""
EXIT_FAILED = 1
"""The work failed: a probe or trial failed, a peer could not be reached or answered
wrongly (an agent with no socket for `ctl interrupt`), a runs-API run outlived every
grace."""
EXIT_CRASH = EXIT_FAILED
"""An unexpected error (a bug: the one case that shows a traceback)."""
EXIT_CONFIG = 2
"""Bad usage or configuration, found before any work began."""
EXIT_DISCONNECTED = 3
"""The platform refused the agent (a wrong key, or a key that is another agent's: `agent`
and `host` alike) or ended its session for good (terminal disconnect)."""
EXIT_PIPE = 141
"""The reader of stdout went away (`band-trio demo | head -3`): nothing on stderr,
the status a shell reports for a tool killed by SIGPIPE (128 + 13)."""
EXIT_INTERRUPTED = 130
"""Interrupted: `band-trio bench` by SIGINT/SIGTERM (its table is incomplete), a
command that does not serve SIGINT itself (`conformance`) or the scripted part of
`demo` by Ctrl-C, or any command by a Ctrl-C before it serves SIGINT (while it
loads): one line."""

EXIT_STATUSES = """\
exit statuses (every command):
  0    done; a server or agent stopped by SIGINT/SIGTERM
  1    the work failed: a probe or trial failed, a peer could not be reached
       or answered wrongly, an unexpected error (the only case with a traceback);
       or still running Policy.hard_stop_deadline after a second signal (named)
  2    bad usage or configuration: a flag, variable, file, URL, address or
       port that cannot be used, an agent or room the admin API does not know
       (ctl); one line on stderr
  3    the platform refused the agent (a wrong key, or a key that is another
       agent's) or ended its session for good; the reason on stderr
  130  interrupted: bench by SIGINT/SIGTERM, conformance and the scripted demo
       by Ctrl-C, any command by one before it serves SIGINT (one line)
  141  stdout's reader went away (| head): quiet, as a tool killed by SIGPIPE
"""


def single(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups, else `exc` itself: what a
    command reports when an error surfaces from a nursery inside `trio.run`."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def exit_at_once(code: int) -> NoReturn:
    """Exit now, without unwinding: the commands' backstop after a second signal, when
    some work ignores its cancel. The process groups band-trio leads are SIGKILLed
    first — a command in a session of its own would outlive us (`contract.groups`).
    Imported here, not with the module: `band_trio.cli` loads this before `main`
    can catch a Ctrl-C, and the contract loads trio."""
    from ..contract.groups import kill_live_groups

    kill_live_groups()
    os._exit(code)
