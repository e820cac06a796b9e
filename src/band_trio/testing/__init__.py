"""Tools for testing agents and adapters against band-trio.

`RecordingAdapter` records every turn with timestamps and lets a test wait for
what it expects; `TaskTracker` proves that work leaves no task behind; `run_chaos` drives an
agent through a seeded storm of platform faults and signals and reports which
promises (if any) broke.
"""

from __future__ import annotations

from ._chaos import CHAOS_POLICY as CHAOS_POLICY
from ._chaos import ChaosReport as ChaosReport
from ._chaos import run_chaos as run_chaos
from ._recorder import Behaviour as Behaviour
from ._recorder import RecordingAdapter as RecordingAdapter
from ._tasks import TaskTracker as TaskTracker
from ._tasks import client_sockets as client_sockets

__all__ = [
    "CHAOS_POLICY",
    "Behaviour",
    "ChaosReport",
    "RecordingAdapter",
    "TaskTracker",
    "client_sockets",
    "run_chaos",
]
