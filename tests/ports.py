"""A port for a process that must be told its port before it starts.

Most servers in the suite bind port 0 and report the port the kernel gave them. Some
cannot: a platform restarted on the same address (a page in the browser reconnects to
it), a how-to whose command line names a port, a URL where nothing must listen. For
those, `free_port()` gives a port that nothing held a moment ago.

It is chosen below the kernel's ephemeral range (Linux: /proc/sys/net/ipv4/
ip_local_port_range), at random. The ephemeral range is where every outgoing
connection of the suite takes its source port; a port from `bind(0)` is one of them,
and with four workers connecting busily, a client's connection once took it between
the probe and the process's own bind ("Address already in use", in a fresh clone's
run). Below the range, only another test's `free_port()` can pick the same port, and
the random choice makes that one in thousands of thousands.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
SPAN = 8000
"""How many ports below the ephemeral range to choose from."""


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; other systems start theirs higher


def free_port() -> int:
    """A port on 127.0.0.1, below the ephemeral range, that nothing holds now."""
    low = _ephemeral_low()
    choose = random.SystemRandom()
    for _ in range(200):
        port = choose.randrange(max(1024, low - SPAN), low)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 below {low} in 200 tries")
