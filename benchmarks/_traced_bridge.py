"""`band-trio` under tracemalloc: SIGUSR1 writes the top allocations to a file.

    python benchmarks/_traced_bridge.py SNAPSHOT.txt bridge --config FILE

Used by `bridge_scale.py --profile`. The handler runs in the main thread between
bytecodes (trio leaves SIGUSR1 alone), so the snapshot is of the running bridge.
"""

from __future__ import annotations

import os
import signal
import sys
import tracemalloc
from pathlib import Path
from types import FrameType


def main() -> int:
    out = Path(sys.argv[1])
    tracemalloc.start(int(os.environ.get("TRACEMALLOC_FRAMES", "1")))

    def dump(signum: int, frame: FrameType | None) -> None:
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        current, peak = tracemalloc.get_traced_memory()
        lines = [f"traced now {current / 2**20:.1f} MiB, peak {peak / 2**20:.1f} MiB", ""]
        lines.append("## by file")
        for stat in snapshot.statistics("filename")[:25]:
            lines.append(str(stat))
        lines += ["", "## by line"]
        for stat in snapshot.statistics("lineno")[:40]:
            lines.append(str(stat))
        lines += ["", "## by traceback (top 10)"]
        for stat in snapshot.statistics("traceback")[:10]:
            lines.append(f"{stat.size / 2**20:.1f} MiB in {stat.count} blocks")
            lines.extend("    " + line for line in stat.traceback.format())
        tmp = out.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.rename(out)
        print(f"tracemalloc snapshot written to {out}", file=sys.stderr, flush=True)

    signal.signal(signal.SIGUSR1, dump)
    from band_trio.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
