"""Reading the ready file `band-trio platform --ready-file F` writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import msgspec

from .. import errors
from ..wire.admin import ReadyInfo

__all__ = ["READY_FILE_BYTES", "read_ready_file", "unreachable_hint"]

READY_FILE_BYTES = 64 * 1024
"""A ready file is a few hundred bytes; past this it is something else."""


def read_ready_file(path: Path) -> ReadyInfo:
    """The platform's ready info, or a `ConfigurationError` saying why it cannot be
    used: unreadable, not a ready file, or left by a platform that is not running
    (its `pid` is gone: the platform removes its file when it exits, so a file left
    behind is from one that was killed)."""
    try:
        ready = msgspec.json.decode(_read(path), type=ReadyInfo)
    except OSError as exc:
        raise errors.ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (msgspec.DecodeError, RecursionError) as exc:
        raise errors.ConfigurationError(f"{path} is not a ready file: {exc}") from exc
    if ready.pid is not None and not _running(ready.pid):
        raise errors.ConfigurationError(
            f"{path} is stale: the platform that wrote it (pid {ready.pid}) is not running; "
            "start it again, or give the URLs yourself"
        )
    return ready


def _read(path: Path) -> bytes:
    """The file's bytes, if it is a regular file of at most `READY_FILE_BYTES`: a FIFO
    would hold the command before it started (opened without blocking, it is refused
    here), and `/dev/zero` would be read until memory ran out."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise errors.ConfigurationError(f"cannot read {path}: not a file")
        data = file.read(READY_FILE_BYTES + 1)
    if len(data) > READY_FILE_BYTES:
        raise errors.ConfigurationError(
            f"{path} is not a ready file: over {READY_FILE_BYTES} bytes"
        )
    return data


def _running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: is there such a process (ours or another user's)?
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or a number kill() cannot take: do not judge
    return True


def unreachable_hint(path: Path | None) -> str:
    """What to add to "cannot reach the platform" when its URL came from a ready file."""
    return "" if path is None else f" (the URL is from {path}: is that platform still running?)"
