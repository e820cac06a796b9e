"""The cyclic garbage collector of a long-running command with a large heap.

CPython's collector walks every object of the generations it collects. With its
default first threshold (700 allocations) and a heap of long-lived objects — the
bridge at a thousand identities holds about half a million, the platform serving
them a similar number — a full collection came every few seconds while the
process started and stopped, each walking the whole heap: most of the bridge's
start-up CPU and of its SIGTERM → exit, and pauses of up to a second under which
every identity's signals waited (docs/benchmarks.md, "One bridge, many
identities"). Short-lived garbage is still collected: only how often the
collector runs changes, not what it frees.

* `collect_rarely(threshold)`, once the command's modules are loaded and its
  configuration read: what is alive then (modules, classes, the configuration)
  lives as long as the process, so after one collection (the garbage of the
  imports) `gc.freeze()` puts it out of the collector's sight; and the first
  threshold becomes `threshold`, so the young generation is collected every
  `threshold` net allocations, the middle one every ten of those, and the whole
  heap only after ten of the middle one's collections (and a quarter more
  long-lived objects than the last full one saw, CPython's own rule).
* `freeze_for_exit()`, as the command returns: the interpreter's last collection
  would walk every object still tracked; the process is ending, nothing needs it.
  The first stopping signal of `agent`, `bridge` and `host` calls it too
  (`_signals`): the stop's own garbage is still collected, but its full
  collections no longer walk every room's objects (at 10,000 idle rooms ~40 %
  of the agent's teardown CPU).

`band-trio agent` collects rarely too (`Policy.collector_threshold`): at a
thousand busy rooms the default ran some 80 collections in the wave of one
agent-wide interrupt, 50-140 ms of the agent's CPU in front of the marks, and
130-240 ms of collections in a busy SIGTERM → exit (docs/benchmarks.md, the scale
rows).

Only the commands do this (`band-trio agent`, `band-trio bridge`, `band-trio
platform`): a program that runs an `Agent`, a `Bridge` or the platform itself
keeps its own collector settings.
"""

from __future__ import annotations

import gc

__all__ = ["collect_rarely", "freeze_for_exit"]


def collect_rarely(threshold: int) -> None:
    """Freeze what is alive now, and collect the young generation every `threshold`
    net allocations (the other two thresholds kept)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(threshold, middle, old)


def freeze_for_exit() -> None:
    """Spare the interpreter's final collection (and the stop's full collections)
    the walk of what is alive now: the process is exiting."""
    gc.freeze()
