"""A command in its own process group, owned by the turn.

`trio.run_process` stops a command by signalling its direct child only, so a
`sh -c`, a pipeline or an `npm` leaves its grandchildren running, and it waits
5 s for a child that ignores SIGTERM (trio 0.35). `run_command` instead
starts the command as the leader of a new session — its pid is the process
group id — and registers the group as the turn's remote work:

    result = await run_command(turn, ["sh", "-c", "make test"], input=b"...")

* **The stop** (an interrupt, a stop, an error, the turn's deadline; sent at
  most once by `Turn.remote`): SIGTERM to the whole group (and SIGCONT, so a
  stopped member can act on it), up to `Policy.subprocess_kill_grace` for
  every member to be gone, then SIGKILL to the group; then the leader is
  reaped. It is `confirmed` once no member is alive.
* **A normal exit** of the leader does not end its group: whatever it left
  running (`sleep 60 &`) is SIGKILLed before `run_command` returns, so a call
  never leaves a process behind.
* **Output** is captured up to `output_limit` bytes per stream (1 MiB by
  default). The rest is still read — a command must never block on a full
  pipe — but thrown away and counted (`CommandResult.stdout_dropped`).
* **Gone** means no member of the group is alive. `os.killpg(pgid, 0)` cannot
  say so on its own: it succeeds while a member is a zombie, and an orphaned
  grandchild is reparented to PID 1, which need not reap it soon (on the
  project's VM, PID 1 is not an init and reaps orphans seconds late). So a
  group that `killpg(pgid, 0)` still finds is looked up in `/proc`: the pids
  whose `getpgid` is the group, then their `/proc/<pid>/stat` state — alive
  unless `Z` (zombie) or `X` (dead), and a zombie whose other threads still
  run counts as alive. Without procfs, `killpg(pgid, 0)` is all there is, and
  a zombie counts as alive. The leader's own exit is awaited (a pidfd); the
  rest of the group is polled (1 ms, doubling to 10 ms), as nothing can be
  awaited for processes that are not our children.
* **The leader is reaped last**: while it is an unreaped zombie its pid — the
  group id — cannot be reused, so every `killpg` is sure to reach this group
  and no other. Nothing is signalled once it has been reaped.

Limits: a process that leaves the group (`setsid`, `setpgid`) escapes it
(containing that needs a cgroup); its hold on our pipes is abandoned
`subprocess_kill_grace` after the group is gone. The zombies of killed
grandchildren are PID 1's to reap. Linux only (pidfd, procfs); elsewhere it
falls back to reaping the leader early and to `killpg(pgid, 0)`.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import trio

from ._remote import StopAnswer, StopOutcome
from ._turn import Turn
from .groups import forget_group, note_group

__all__ = ["DEFAULT_OUTPUT_LIMIT", "CommandResult", "run_command"]

log = logging.getLogger("band_trio.process")

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
"""Bytes of stdout, and of stderr, that `run_command` keeps by default."""

_POLL_FIRST = 0.001
_POLL_MAX = 0.01
"""How often a group's remaining members are looked for once its leader has exited
(doubling from the first to the last): nothing can be awaited for processes that are
not our children, and a first look right away catches the common case."""
_REAP_MARGIN = 1.0
"""What a process group's stop gets beyond its kill grace: the SIGKILL, the reaping,
and the check that nothing of the group is left."""
_TERM_SHARE = 0.75
"""The SIGTERM phase never takes more than this share of the stop's own deadline
(`Policy.backend_stop_grace`), whatever the kill grace: SIGKILL always goes out."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended, and what it wrote."""

    returncode: int
    """The leader's exit status; negative if a signal ended it (-9: SIGKILL)."""
    stdout: bytes
    stderr: bytes
    stdout_dropped: int = 0
    """Bytes of stdout past the output limit, read and thrown away."""
    stderr_dropped: int = 0
    """Bytes of stderr past the output limit, read and thrown away."""

    @property
    def truncated(self) -> bool:
        """Whether any output was cut at the limit."""
        return bool(self.stdout_dropped or self.stderr_dropped)


async def run_command(
    turn: Turn,
    argv: Sequence[str],
    *,
    input: bytes = b"",
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str = "process group",
    output_limit: int = DEFAULT_OUTPUT_LIMIT,
) -> CommandResult:
    """Run `argv` in a new process group owned by `turn`; an abort ends the whole group.

    `input` is written to the command's stdin, which is then closed (a command
    that exits without reading it all is not an error). `env` replaces the
    environment (None: inherit ours). stdout and stderr are kept up to
    `output_limit` bytes each. Returns once the leader has exited and no
    process of its group is left; a nonzero exit is not an error here.

    Raises `FileNotFoundError` if the executable (or `cwd`) does not exist, and
    `PermissionError` if it cannot be executed; `trio.Cancelled` if the turn is
    aborted, after the group has been stopped (`Turn.remote_stops` says how) —
    or at once, starting nothing, if it was aborted before the call.
    """
    if not argv:
        raise ValueError("run_command needs a command to run")
    if output_limit < 0:
        raise ValueError(f"output_limit must be >= 0, got {output_limit}")
    grace = turn.kill_grace
    group: _Group | None = None

    async def stop(_pgid: int) -> StopAnswer:
        assert group is not None  # a stop is only sent for started work
        return await group.stop(grace)

    out, err = _Capture(output_limit), _Capture(output_limit)
    returncode = 0
    # `starting()` lets a start that is in flight finish; one that has not begun
    # yet has no reason to, once the turn is aborted
    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        # the stop's own deadline: SIGTERM, the kill grace, SIGKILL and the reaping
        async with turn.remote(stop=stop, name=name, grace=grace + _REAP_MARGIN) as work:
            with work.starting():  # a cancel now would orphan the process: let it start
                group = _Group(await _spawn(argv, cwd, env))
                work.started(group.pgid)
            proc = group.proc
            assert proc.stdin is not None and proc.stdout is not None
            assert proc.stderr is not None
            # The pipes are served in a shielded scope: a cancel of the turn reaches
            # this task alone, which sends SIGTERM first and only then ends them, so
            # the signal never waits for three other tasks to unwind.
            pipes = trio.CancelScope(shield=True)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_serve_pipes, pipes, proc, input, out, err)
                    try:
                        await group.leader_exited()
                    except BaseException:
                        # Aborted (or failing): SIGTERM now; the remote stop confirms
                        # the end and escalates to SIGKILL (its `took` counts from here).
                        group.terminate()
                        pipes.cancel()
                        raise
                    returncode = await group.clear(grace)
                    work.finished()  # nothing of it is left: no stop to send
                    # The pipes are at EOF now, unless a process that left the group
                    # holds them: give up on that one's output after the grace.
                    pipes.deadline = trio.current_time() + grace
            finally:
                _close_pipes(proc)
            if pipes.cancelled_caught:
                log.warning(
                    "room %s: %s %d: its output pipes outlived the group; stopped reading",
                    turn.room_id,
                    name,
                    group.pgid,
                )
    finally:
        if group is not None:
            group.close()
    return CommandResult(
        returncode=returncode,
        stdout=out.value(),
        stderr=err.value(),
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
    )


async def _serve_pipes(
    scope: trio.CancelScope,
    proc: trio.Process,
    input: bytes,
    out: _Capture,
    err: _Capture,
) -> None:
    """Feed stdin and read stdout and stderr, under `scope` (see `run_command`)."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with scope:
        async with trio.open_nursery() as pipes:
            pipes.start_soon(_feed, proc.stdin, input)
            pipes.start_soon(_read, proc.stdout, out)
            pipes.start_soon(_read, proc.stderr, err)


async def _spawn(
    argv: Sequence[str], cwd: str | None, env: Mapping[str, str] | None
) -> trio.Process:
    """Start `argv` as the leader of a new session, with three pipes; clear errors."""
    try:
        return await trio.lowlevel.open_process(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # pgid == pid: one killpg reaches every descendant
        )
    except FileNotFoundError as exc:
        if cwd is not None and exc.filename == cwd:
            raise FileNotFoundError(errno.ENOENT, "working directory not found", cwd) from exc
        what = "command file not found" if "/" in argv[0] else "command not found on PATH"
        raise FileNotFoundError(errno.ENOENT, what, argv[0]) from exc
    except PermissionError as exc:
        raise PermissionError(errno.EACCES, "command is not executable", argv[0]) from exc


class _Group:
    """The process group a command leads, and how it is ended."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.pgid = proc.pid
        note_group(self.pgid)  # for an exit that cannot wait for this owner (`groups`)
        self.closed = False
        """No member is alive and the leader is reaped: nothing may be signalled now."""
        self.terminated_at: float | None = None
        """When SIGTERM was sent (trio clock), once it was."""
        self._pidfd: int | None = None
        # A pidfd lets us wait for the exit without reaping (absent before Linux 5.3)
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(proc.pid)

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def signal(self, signum: signal.Signals) -> None:
        """Send `signum` to every member (none once the leader is reaped)."""
        if self.closed:
            return
        # ESRCH only once the leader was reaped and its group ended (the no-pidfd path)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signum)

    def alive(self) -> bool:
        return not self.closed and _group_alive(self.pgid)

    def leader_has_exited(self) -> bool:
        """Whether the leader has exited (it is not reaped by asking)."""
        if self._pidfd is None:  # pragma: no cover - no pidfd: ask trio, which reaps
            return self.proc.returncode is not None
        return os.waitid(os.P_PID, self.pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    async def leader_exited(self) -> None:
        """Wait for the leader to exit; with a pidfd, it is left unreaped (see `reap`)."""
        if self._pidfd is None:  # pragma: no cover - no pidfd: waiting means reaping
            await self.proc.wait()
            return
        await trio.lowlevel.wait_readable(self._pidfd)

    async def wait_gone(self) -> None:
        """Return once no member is alive: the leader's exit awaited, the rest polled."""
        await self.leader_exited()
        interval = _POLL_FIRST
        while self.alive():
            await trio.sleep(interval)
            interval = min(interval * 2, _POLL_MAX)

    async def reap(self) -> int:
        """Reap the leader (it has exited) and close the group for good."""
        returncode = await self.proc.wait()
        self.closed = True
        forget_group(self.pgid)
        return returncode

    async def clear(self, grace: float) -> int:
        """After the leader exited on its own: SIGKILL what it left in the group, reap."""
        if self.alive():
            log.debug("process group %d: killing what its leader left running", self.pgid)
            self.signal(signal.SIGKILL)
            with trio.move_on_after(grace) as waited:
                await self.wait_gone()
            if waited.cancelled_caught:  # SIGKILL is pending on them: they never run again
                log.warning("process group %d: SIGKILLed members still not gone", self.pgid)
        return await self.reap()

    def terminate(self) -> None:
        """SIGTERM (and SIGCONT: a stopped member acts on it) every member, once."""
        if self.closed or self.terminated_at is not None:
            return
        self.terminated_at = trio.current_time()
        self.signal(signal.SIGTERM)
        self.signal(signal.SIGCONT)

    async def stop(self, grace: float) -> StopAnswer:
        """SIGTERM the group, SIGKILL it after `grace` if a member is left, reap the leader.

        Runs as the turn's remote stop, shielded under its own deadline; the SIGTERM
        phase leaves part of that deadline to SIGKILL (`_TERM_SHARE`)."""
        if self.closed:
            return StopOutcome.CONFIRMED, "had already ended"
        start = self.terminated_at or trio.current_time()
        deadline = trio.current_effective_deadline()
        term_until = start + grace
        if not math.isinf(deadline):
            term_until = min(term_until, start + (deadline - start) * _TERM_SHARE)
        try:
            if self.terminated_at is None and self.leader_has_exited() and not self.alive():
                detail = "had already ended"
            else:  # signal first, look later: every millisecond counts here
                self.terminate()
                with trio.move_on_at(term_until) as term:
                    await self.wait_gone()
                if not term.cancelled_caught:
                    took = trio.current_time() - start
                    detail = f"ended on SIGTERM in {took * 1000:.1f} ms"
                else:
                    self.signal(signal.SIGKILL)
                    await self.wait_gone()
                    detail = f"SIGKILLed: SIGTERM ignored for {term_until - start:.2f} s"
            await self.reap()
        finally:
            if not self.closed:  # cut short by the stop's deadline: no survivor either way
                self.signal(signal.SIGKILL)
        return StopOutcome.CONFIRMED, detail


def _group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` is alive (a zombie is not)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # no member at all, not even a zombie
    except PermissionError:
        pass  # a member we may not signal (it changed its uid): look it up
    return _live_member_in_proc(pgid)


def _live_member_in_proc(pgid: int) -> bool:
    """Look for a live member of `pgid` in `/proc`: `getpgid` on every pid (a syscall,
    not a file read: ~70 µs for 80 processes), then the state of those that match.
    procfs is in memory: these reads do not block."""
    try:
        names = os.listdir("/proc")
    except OSError:  # no procfs: killpg(pgid, 0) found a member, zombie or not
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            if os.getpgid(int(name)) != pgid:
                continue
        except OSError:  # it ended meanwhile
            continue
        if _is_live(name, pgid):
            return True
    return False


def _is_live(pid: str, pgid: int) -> bool:
    """Whether `pid` (a member of `pgid`) is alive according to its `/proc/<pid>/stat`."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False  # it ended meanwhile
    # "pid (comm) state ppid pgrp ...": comm may hold spaces and ')', so split after the last
    fields = stat[stat.rfind(b")") + 2 :].split(maxsplit=3)
    if len(fields) < 3 or int(fields[2]) != pgid or fields[0] == b"X":
        return False
    if fields[0] == b"Z":  # a zombie, unless its main thread exited and others run on
        try:
            return len(os.listdir(f"/proc/{pid}/task")) > 1
        except OSError:
            return False
    return True


class _Capture:
    """One output stream: the first `limit` bytes kept, the rest counted."""

    __slots__ = ("_chunks", "_room", "dropped")

    def __init__(self, limit: int) -> None:
        self._chunks: list[bytes | bytearray] = []
        self._room = limit
        self.dropped = 0

    def add(self, chunk: bytes | bytearray) -> None:
        kept = chunk[: self._room]
        if kept:
            self._chunks.append(kept)
            self._room -= len(kept)
        self.dropped += len(chunk) - len(kept)

    def value(self) -> bytes:
        return b"".join(self._chunks)


async def _feed(stream: trio.abc.SendStream, data: bytes) -> None:
    """Write `data` to the command's stdin and close it (EOF tells it there is no more)."""
    async with stream:
        try:
            if data:
                await stream.send_all(data)
        except trio.BrokenResourceError:
            pass  # it closed its stdin, or ended, without reading everything


async def _read(stream: trio.abc.ReceiveStream, into: _Capture) -> None:
    """Read to EOF — every writer of the pipe gone — past the limit too."""
    async for chunk in stream:
        into.add(chunk)


def _close_pipes(proc: trio.Process) -> None:
    """Close our ends of the pipes at once (synchronously: fine under a cancel)."""
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if isinstance(stream, trio.lowlevel.FdStream):
            stream.close()
