"""A JSON-RPC peer as a child process (the Copilot CLI, an ACP agent): started in a
process group of its own, ended whole.

Such a peer runs tools (a shell, ripgrep, MCP servers) as its own children, so it
is started as the leader of a new session — its pid is the group id — and ended
by signalling the group: SIGTERM (the Copilot CLI exits in about 70 ms), SIGKILL
to what is left after `kill_grace`, then the leader is reaped. Its exit is
awaited on a pidfd without reaping it, so every `killpg` reaches this group and
no other (an unreaped leader keeps its pid, the group id, from being reused). If
the agent itself dies, the child sees its stdin end and exits by itself (the
Copilot CLI in about 2 s).

Its stderr is read to the end by a task of the owner, keeping only the last bytes
(`stderr_tail`) to say why it exited: a chatty child never grows the agent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

import trio

from ..contract.groups import forget_group, note_group

__all__ = ["ChildProcess", "spawn"]

log = logging.getLogger("band_trio.adapters")


async def spawn(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str], stderr_tail: int, what: str
) -> ChildProcess:
    """Start `argv` with three pipes, leading a new session; an `OSError` says what
    (`what`: "the Copilot CLI") could not be started, and why."""
    try:
        proc = await trio.lowlevel.open_process(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise OSError(exc.errno, f"cannot start {what} {argv[0]!r}: {exc.strerror}") from exc
    return ChildProcess(proc, stderr_tail, what)


class ChildProcess:
    """One running child and how it is ended."""

    def __init__(self, proc: trio.Process, stderr_tail: int, what: str) -> None:
        self.proc = proc
        self.what = what
        self.pid = proc.pid
        self._tail = bytearray()
        self._tail_size = stderr_tail
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # Linux >= 5.3
            self._pidfd = os.pidfd_open(proc.pid)
        self._reaped = False
        note_group(self.pid)  # for an exit that cannot wait for this owner

    @property
    def reaped(self) -> bool:
        """Whether the leader has been reaped: its pid, the group id, may be reused."""
        return self._reaped

    def _was_reaped(self) -> None:
        self._reaped = True
        forget_group(self.pid)

    @property
    def stdin(self) -> trio.abc.SendStream:
        assert self.proc.stdin is not None
        return self.proc.stdin

    @property
    def stdout(self) -> trio.abc.ReceiveStream:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def stderr_text(self) -> str:
        """The last bytes the child wrote to stderr, as one line."""
        return " ".join(self._tail.decode("utf-8", "replace").split())

    async def read_stderr(self) -> None:
        """Read stderr to its end, keeping the tail (the owner's task)."""
        assert self.proc.stderr is not None
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async for chunk in self.proc.stderr:
                self._tail += chunk
                del self._tail[: max(0, len(self._tail) - self._tail_size)]

    def has_exited(self) -> bool:
        if self.reaped or self._pidfd is None:
            return self._poll() is not None
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def _poll(self) -> int | None:
        """The exit status, reaping the leader if it has exited: only once it is reaped
        anyway, or with no pidfd (nothing else can say whether it exited)."""
        code = self.proc.poll()
        if code is not None and not self._reaped:
            self._was_reaped()
        return code

    async def exited(self) -> None:
        """Return once the child has exited (with a pidfd, it is left unreaped)."""
        if self._pidfd is None or self.reaped:
            await self.proc.wait()
            self._was_reaped()
            return
        await trio.lowlevel.wait_readable(self._pidfd)

    def describe_exit(self) -> str:
        """`exited with status 1` / `killed by SIGKILL` (once it has exited). With a
        pidfd it never reaps: trio's `returncode` would, behind `reaped`'s back."""
        code: int | None = None
        if self.reaped or self._pidfd is None:
            code = self._poll()
        else:
            found = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            if found is not None:
                killed = found.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
                code = -found.si_status if killed else found.si_status
        if code is None:
            return "is still running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
            return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def signal_group(self, signum: signal.Signals) -> None:
        """Signal every process of the group, and the leader itself should it have left
        the group (nothing once the leader is reaped: its pid may be reused then)."""
        if self.reaped:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signum)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.pid, signum)

    async def stop(self, kill_grace: float) -> None:
        """End the group: SIGTERM, SIGKILL after `kill_grace`, then reap the leader.

        Shielded: it runs while its owner is being cancelled, and is bounded: by the
        grace, then by as long again for the SIGKILLed leader to be reaped (a process
        stuck in the kernel is given up on, and logged)."""
        with trio.CancelScope(shield=True):
            if not self.has_exited():
                self.signal_group(signal.SIGTERM)
                self.signal_group(signal.SIGCONT)  # a stopped member acts on it
                with trio.move_on_after(kill_grace):
                    await self.exited()
            self.signal_group(signal.SIGKILL)  # the leader, if still there; what it left
            with trio.move_on_after(kill_grace) as reaping:
                await self.proc.wait()
                self._was_reaped()
            self._close()
            if reaping.cancelled_caught:
                log.error("%s (pid %d) outlived SIGKILL; given up on", self.what, self.pid)

    def _close(self) -> None:
        """Close the pidfd and our ends of the pipes (synchronously: fine under a cancel)."""
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if isinstance(stream, trio.lowlevel.FdStream):
                stream.close()
