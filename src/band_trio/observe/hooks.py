"""The hooks band-trio's own layers call — the runtime, the link, the contract, the
bridge, the runs API — as `from ..observe import hooks as observe`.

Internal to band-trio: a named internal API of `observe` for band-trio's other
packages, with no compatibility promise between releases and nothing for agent
or adapter authors (what a user of band-trio needs is `band_trio.observe`'s
`__all__`). It is a module of its own, not `observe`'s private modules reached
into, so that what the other layers may call is one short list, here, and the
rest of `observe` can change behind it. Each hook costs one check while tracing
is off (see `_trace`).
"""

from __future__ import annotations

from ._instruments import Sample as Sample
from ._instruments import track as track
from ._instruments import untrack as untrack
from ._logs import bound as bound
from ._logs import correlation_id as correlation_id
from ._trace import step as step
from ._trace import tracer as tracer
from ._work import Aborts as Aborts
from ._work import ThreadWatch as ThreadWatch
from ._work import Work as Work
from ._work import adapter_call as adapter_call
from ._work import asyncio_overran as asyncio_overran
from ._work import asyncio_overrun_ended as asyncio_overrun_ended
from ._work import connected as connected
from ._work import reconnecting as reconnecting
from ._work import remote_stop as remote_stop
from ._work import rest_call as rest_call
from ._work import scope_exited as scope_exited
from ._work import signal_counted as signal_counted

__all__ = [
    "Aborts",
    "Sample",
    "ThreadWatch",
    "Work",
    "adapter_call",
    "asyncio_overran",
    "asyncio_overrun_ended",
    "bound",
    "connected",
    "correlation_id",
    "reconnecting",
    "remote_stop",
    "rest_call",
    "scope_exited",
    "signal_counted",
    "step",
    "tracer",
    "track",
    "untrack",
]
