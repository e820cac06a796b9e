"""What an agent process costs, read from `/proc`: its CPU time and its resident memory.

Read by the driver for every process it measures alike (the agents under test
and the scale floor's bare client), once its rooms are synced: the CPU time is
the process's own (user + system, `/proc/PID/stat`), steadier on a shared
machine than the wall time beside it; it includes the interpreter's start and
imports, as a user's agent pays them. Linux only: elsewhere both are None.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cpu_s", "rss_kib"]


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds the process has used so far, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int | None:
    """The process's resident set (`VmRSS`) in KiB, or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
