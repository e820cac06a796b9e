"""`band-trio bench`: cancellation latency, band-trio and band-sdk side by side.

The embedded platform runs in the driver's process; each agent under test
(`_trio_subject`: the real `band-trio agent` command; `_sdk_subject`: the
real band-sdk 6.0.1 agent, the `peer` extra) and the floor client run in
processes of their own, all stamping `time.perf_counter()`. See
docs/benchmarks.md for the method and what each metric includes.

    report = trio.run(run_bench, Options.quick())
    print(table(report))
    plot(report, "bench.png")  # matplotlib: the `bench` extra

The driver's modules import trio; the names are loaded on first use so that
the band-sdk subject, which imports `_protocol` from here, stays asyncio only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._bench import Options as Options
    from ._plot import check_plotting as check_plotting
    from ._plot import plot as plot
    from ._report import table as table
    from ._report import write_json as write_json
    from ._results import Row as Row
    from ._run import Report as Report
    from ._run import run_bench as run_bench

__all__ = [
    "Options",
    "Report",
    "Row",
    "check_plotting",
    "plot",
    "run_bench",
    "table",
    "write_json",
]

_HOMES = {
    "Options": "._bench",
    "Report": "._run",
    "Row": "._results",
    "check_plotting": "._plot",
    "plot": "._plot",
    "run_bench": "._run",
    "table": "._report",
    "write_json": "._report",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name], __name__), name)
    globals()[name] = value
    return value
