"""The remote-stop scenario: signal → the process group the turn started is gone.

The held turn starts `/bin/sh` and a `sleep` child in a process group of their
own (`_protocol.command_script`), which write their pids to a FIFO the
driver reads. The driver opens a pidfd for each and waits for all of them to
become readable (the process has exited); "gone" is stamped at that wake-up.
band-trio runs the group with `run_command`; the band-sdk subject kills its
session group on `CancelledError`, as its author would have to.
"""

from __future__ import annotations

import os
import tempfile
import time

import trio

from ._bench import since, timed
from ._protocol import CMD
from ._tier import Tier

__all__ = ["command_trial"]


async def _read_pids(path: str) -> list[int]:
    """The pids the script writes to the FIFO at `path`. A writer end is held open
    here so the reader never sees an end of file before the script has written."""
    stream = trio.lowlevel.FdStream(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    data = b""
    try:
        async with stream:
            while not data.endswith(b"\n"):
                data += await stream.receive_some()
    finally:
        os.close(writer)
    return [int(p) for p in data.split()]


async def _gone(pids: list[int]) -> float:
    """Wait until every pid has exited; the stamp of the last exit seen."""
    fds = []
    try:
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))
            except ProcessLookupError:
                continue
        for fd in fds:
            await trio.lowlevel.wait_readable(fd)
        return time.perf_counter()
    finally:
        for fd in fds:
            os.close(fd)


async def command_trial(tier: Tier) -> None:
    bench, subject = tier.bench, tier.subject
    deadline = bench.options.deadline
    series = bench.metric(
        tier.runtime, "remote stop: command", tier.rooms, "interrupt → process group gone", "push"
    )
    with tempfile.TemporaryDirectory(prefix="band-bench-") as folder:
        fifo = os.path.join(folder, "pids")
        os.mkfifo(fifo)
        message = bench.post(tier.target, f"{CMD} {fifo}")
        pids = None
        with trio.move_on_after(deadline):
            pids = await _read_pids(fifo)
        if pids is None or await timed(deadline, lambda: subject.wait("enter", message)) is None:
            series.add(None, "the command never started")
            return
        await trio.sleep(bench.options.settle)
        position = bench.watch.position
        bench.platform.send_control(tier.identity.agent_id, "interrupt", room_id=tier.target)
        sent = await timed(
            deadline, lambda: bench.watch.wait(("control", tier.identity.agent_id), position)
        )
        gone = await timed(deadline, lambda: _gone(pids))
        series.add(since(gone, sent), "the process group outlived the deadline")
        await timed(deadline, lambda: bench.watch.wait(("processed", message), position))
