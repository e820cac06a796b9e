"""How far a bounded probe got: written by the probe's own thread, read by its caller's.

`_bounded.run_bounded` runs each probe on a thread of its own; the kit notes
there what it is waiting for (`Kit.until`) and when its script has a verdict,
so a probe that never ends can say where it got stuck.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._kit import ProbeResult

__all__ = ["Progress", "enter", "progress"]

_local = threading.local()


@dataclass
class Progress:
    """How far one probe got, written by its own thread, read by the caller's."""

    name: str
    waiting: str = "the platform and the agent to start"
    """What the probe waits for now (`Kit.until`'s `what`, or a phase)."""
    verdict: ProbeResult | None = None
    """The script's result, once it has one (the kit may still be stopping)."""
    result: ProbeResult | None = None
    """The probe's final result, once its run has returned."""
    _on_verdict: Callable[[], None] = field(default=lambda: None, repr=False)

    def note(self, waiting: str) -> None:
        self.waiting = waiting

    def reached(self, verdict: ProbeResult) -> None:
        """The script is over: from now on the kit gets `Subject.deadline` to close."""
        self.verdict = verdict
        self.waiting = "the agent to stop (after the script's verdict)"
        self._on_verdict()


def enter(state: Progress) -> None:
    """This thread runs the probe `state` follows."""
    _local.progress = state


def progress() -> Progress | None:
    """The progress of the probe running in this thread, if it is a bounded one."""
    found: Progress | None = getattr(_local, "progress", None)
    return found
