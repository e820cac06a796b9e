"""Tools for testing agents and adapters against band-trio.

`TaskTracker` proves that work leaves no task behind; `run_chaos` drives an
agent through a seeded storm of platform faults and signals and reports which
promises (if any) broke.
"""

from __future__ import annotations

from ._chaos import CHAOS_POLICY as CHAOS_POLICY
from ._chaos import ChaosReport as ChaosReport
from ._chaos import run_chaos as run_chaos
from ._tasks import TaskTracker as TaskTracker
from ._tasks import client_sockets as client_sockets

__all__ = ["CHAOS_POLICY", "ChaosReport", "TaskTracker", "client_sockets", "run_chaos"]
