"""Counting the tasks a piece of work leaves behind."""

from __future__ import annotations

import os

import trio

__all__ = ["TaskTracker", "client_sockets"]


class TaskTracker(trio.abc.Instrument):
    """Tracks the live tasks spawned, directly or not, under one root task.

    Install it (`trio.lowlevel.add_instrument`), call `adopt()` from the task
    whose descendants you care about, and after that task has finished
    `living` must be empty: anything still in it outlived its owner.
    """

    def __init__(self) -> None:
        self.root: trio.lowlevel.Task | None = None
        self.living: set[trio.lowlevel.Task] = set()
        self.spawned = 0
        self.root_exited = False

    def adopt(self) -> None:
        """Make the calling task the root."""
        self.root = trio.lowlevel.current_task()

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        nursery = task.parent_nursery
        parent = nursery.parent_task if nursery is not None else None
        if parent is not None and (parent is self.root or parent in self.living):
            self.living.add(task)
            self.spawned += 1

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self.living.discard(task)
        if task is self.root:
            self.root_exited = True


def client_sockets(port: int) -> int | None:
    """Open TCP sockets of this process whose peer is `port`; None where the
    platform has no `/proc/net/tcp` to read (only Linux does)."""
    if not os.path.exists("/proc/net/tcp"):
        return None
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    count = 0
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if int(fields[2].split(":")[1], 16) == port and fields[9] in inodes:
                count += 1
    return count
