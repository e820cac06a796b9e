"""What an agent run may leave behind: tasks, client sockets, child processes.

A snapshot is taken before the agent starts (`Leaks.now()`); after it stopped,
`left()` lists what is new and still there — a task outliving `Agent.run`, a
TCP connection this process opened and did not close, a child process still
running. The snapshot makes it fair to a test that started its own peers
(those were there before). Linux only (it reads `/proc`); elsewhere only the
tasks are checked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import trio

from ..contract.groups import children
from ._tasks import TaskTracker

__all__ = ["Leaks"]

_ESTABLISHED, _CLOSE_WAIT = "01", "08"


@dataclass(frozen=True, slots=True)
class Leaks:
    sockets: frozenset[str]
    children: frozenset[int]
    system_tasks: frozenset[trio.lowlevel.Task]

    @classmethod
    def now(cls) -> Leaks:
        """The snapshot; call it from inside the trio run."""
        return cls(frozenset(_client_sockets()), frozenset(_children()), frozenset(_system()))

    def left(self, tasks: TaskTracker, server_port: int) -> list[str]:
        """What is left now that was not there at the snapshot (empty: nothing)."""
        found = [f"task outlived the agent: {task.name}" for task in tasks.living]
        found += [
            f"system task outlived the agent: {task.name}" for task in _system() - self.system_tasks
        ]
        for inode, (local, remote) in _client_sockets().items():
            if inode not in self.sockets and local != server_port:
                found.append(f"socket left open: 127.0.0.1:{local} → port {remote}")
        found += [
            f"child process left running: pid {child} ({_command(child)})"
            for child in _children() - self.children
        ]
        return found


def _system() -> set[trio.lowlevel.Task]:
    """The tasks of trio's system nursery (where `spawn_system_task` puts them): no
    owner waits for those, so one an adapter left is found here, not by the tracker."""
    root = trio.lowlevel.current_root_task()
    if root is None:
        return set()
    return {task for nursery in root.child_nurseries for task in nursery.child_tasks}


def _own_socket_inodes() -> set[str]:
    inodes: set[str] = set()
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    return inodes


def _client_sockets() -> dict[str, tuple[int, int]]:
    """This process's TCP connections (not listeners), inode → (local, remote) port."""
    mine = _own_socket_inodes()
    found: dict[str, tuple[int, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] not in (_ESTABLISHED, _CLOSE_WAIT) or fields[9] not in mine:
                continue
            local = int(fields[1].rsplit(":", 1)[1], 16)
            remote = int(fields[2].rsplit(":", 1)[1], 16)
            found[fields[9]] = (local, remote)
    return found


def _children() -> set[int]:
    """Live (not zombie) processes whose parent is this process."""
    return {pid for pid, (state, _) in children().items() if state not in ("Z", "X")}


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:80]
