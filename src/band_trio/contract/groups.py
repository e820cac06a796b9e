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

A group can also be too new to be noted: trio starts a process in a worker
thread, and the command may be running before the task that started it has
resumed to note it (an exit at once after a signal met that). So the exit also
kills every child of this process that leads a process group of its own, found
in `/proc` — again only unreaped children, whose ids cannot have been reused.
A child caught between its fork and its `setsid` is still in our group and
escapes both; it is a window of microseconds.

Internal to band-trio: a named internal API of `contract` for band-trio's other
packages (an adapter that starts a process group of its own notes it here, the
CLI's hard exit kills them, the test kit's leak check lists the children), with
no compatibility promise and nothing for agent authors, who start processes
with `run_command`. It lives in `contract` beside `run_command`, the main owner
of such groups.
"""

from __future__ import annotations

import contextlib
import os
import signal

__all__ = ["children", "children_leading_groups", "forget_group", "kill_live_groups", "note_group"]

_LIVE: set[int] = set()


def note_group(pgid: int) -> None:
    """`pgid` leads a group of ours (called once it is started)."""
    _LIVE.add(pgid)


def forget_group(pgid: int) -> None:
    """`pgid`'s leader has been reaped: its id may be reused from now on."""
    _LIVE.discard(pgid)


def children() -> dict[int, tuple[str, int]]:
    """This process's children, from `/proc/<pid>/stat`: pid → (state, process group);
    empty without procfs. A zombie is listed (state `Z`) until it is reaped."""
    me, found = os.getpid(), dict[int, tuple[str, int]]()
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after the command's name
        if int(fields[1]) == me:
            found[int(name)] = (fields[0].decode(), int(fields[2]))
    return found


def children_leading_groups() -> set[int]:
    """The pids of this process's children that lead a process group of their own."""
    return {pid for pid, (_, group) in children().items() if group == pid}


def kill_live_groups() -> int:
    """SIGKILL every group still noted, and every group a child of ours leads; how many
    there were. For the last moment of a process that exits without unwinding
    (`os._exit`): nothing is awaited."""
    groups = _LIVE | children_leading_groups()
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return len(groups)
