"""The process groups band-trio leads, for the one exit that cannot wait for their owners.

Each group is owned by the work that started it — a turn's `run_command`, the
Copilot CLI's connection — which ends it: SIGTERM, a grace, SIGKILL, the leader
reaped. An exit through `os._exit` runs none of that. The commands take it only
as their backstop (still running `Policy.hard_stop_deadline` after a second
signal: some work ignores its cancel), and a group in a session of its own
outlives its parent: a `sleep 600` would run on for ten minutes.

So each group is noted here from its start until its leader is reaped, and
`kill_live_groups()` SIGKILLs every one just before such an exit. Nothing else
reads the set: stopping work stays its owner's business. A pid is noted only
while it is an unreaped child, so its group id cannot have been reused.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["forget_group", "kill_live_groups", "note_group"]

_LIVE: set[int] = set()


def note_group(pgid: int) -> None:
    """`pgid` leads a group of ours (called once it is started)."""
    _LIVE.add(pgid)


def forget_group(pgid: int) -> None:
    """`pgid`'s leader has been reaped: its id may be reused from now on."""
    _LIVE.discard(pgid)


def kill_live_groups() -> int:
    """SIGKILL every group still noted; how many there were. For the last moment of a
    process that exits without unwinding (`os._exit`): nothing is awaited."""
    groups = list(_LIVE)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return len(groups)
