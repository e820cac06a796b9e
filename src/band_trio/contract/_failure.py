"""What an adapter's code raised: its own failure, or a cancel or Ctrl-C passing through.

An adapter may raise any `BaseException`: `SystemExit` (a `sys.exit()` deep in a
library), a `KeyboardInterrupt` of its own, a misused `GeneratorExit`. Each is
that turn's failure — the message is marked failed, and the agent, the runs
API, the host and the conformance kit go on — not the end of the process. Two
kinds pass through untouched:

* `trio.Cancelled` (alone, or a group of nothing else): the turn's abort, or its
  owner's cancel;
* a real Ctrl-C: trio's SIGINT handler raises `KeyboardInterrupt` inside whatever
  code was running when the signal came (an adapter's, as often as not); its
  traceback ends in that handler, which is how it is told from an adapter's own
  `raise KeyboardInterrupt`. (Under `band-trio agent`, `host`, `bridge` and
  `runs-api` SIGINT is a signal the command serves, so no `KeyboardInterrupt` is
  raised for it at all.)

    try:
        await adapter.on_turn(turn)
    except BaseException as exc:
        if not adapter_failure(exc):
            raise
        ...  # the turn failed
"""

from __future__ import annotations

import os
from types import TracebackType

import trio

__all__ = ["adapter_failure"]

_TRIO_SIGINT_HANDLER = os.path.join("trio", "_core", "_ki.py")
"""Where trio's SIGINT handler lives (`KIManager.install.<locals>.handler`)."""


def adapter_failure(exc: BaseException) -> bool:
    """Whether `exc`, raised out of an adapter's code, is the adapter's own failure
    (False: a cancel, or a real Ctrl-C, which must go on up)."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = list(_leaves(exc))
        if any(_real_ctrl_c(leaf) for leaf in leaves):
            return False
        return not all(isinstance(leaf, trio.Cancelled) for leaf in leaves)
    if isinstance(exc, trio.Cancelled):
        return False
    return not _real_ctrl_c(exc)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for inner in group.exceptions:
        if isinstance(inner, BaseExceptionGroup):
            found.extend(_leaves(inner))
        else:
            found.append(inner)
    return found


def _real_ctrl_c(exc: BaseException) -> bool:
    """A `KeyboardInterrupt` raised by trio's SIGINT handler (a signal, not `raise`)."""
    if not isinstance(exc, KeyboardInterrupt):
        return False
    last: TracebackType | None = exc.__traceback__
    while last is not None and last.tb_next is not None:
        last = last.tb_next
    return last is not None and last.tb_frame.f_code.co_filename.endswith(_TRIO_SIGINT_HANDLER)
