"""Read a hop trace (`hot_path.py --trace FILE --json RESULT`): where each signal's time went.

    .venv/bin/python benchmarks/hop_report.py RESULT.json FILE.new.json [new]

For every measured signal of the traced agent (hot_path's rounds send it, per
round, interrupt, stop, play and an unmeasured interrupt), the time of each hop
after the platform's frame stamp, as medians over the trials in µs, and which
tasks trio stepped between the adapter's `Cancelled` and `settle`.
"""

from __future__ import annotations

import bisect
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

MODES = ("interrupt", "stop", "play")
HOPS = {
    "interrupt": ("/receive_some", "on_push", "apply", "room", "abort", "/abort", "/apply",
                  "observe:cancel", "settle", "rest_call", "lanes", "pool", "exchange", "send_all"),
    "stop": ("/receive_some", "on_push", "apply", "room", "abort", "/abort", "/apply",
             "observe:cancel", "settle", "report_idle", "rest_call", "lanes", "pool", "exchange",
             "send_all"),
    "play": ("/receive_some", "on_push", "apply", "/apply", "rest_call", "send_all",
             "/rest_call", "rest_call", "send_all", "/rest_call", "observe:enter"),
}  # fmt: skip


def main() -> None:
    result = json.loads(Path(sys.argv[1]).read_text())
    events = json.loads(Path(sys.argv[2]).read_text())
    label = sys.argv[3] if len(sys.argv) > 3 else "new"
    frames = result["frames"][label]
    times = [e[0] for e in events]
    n = next(r["n"] for r in result["rows"] if r["runtime"] == label and r["scenario"] == "stop")
    by_mode: dict[str, list[list[float]]] = {m: [] for m in MODES}
    between: Counter[str] = Counter()
    for i in range(n):
        for mode, t0 in zip(MODES, frames[4 * i : 4 * i + 3], strict=True):
            start = bisect.bisect_left(times, t0)
            stamps, j = [], start
            for hop in HOPS[mode]:
                while j < len(events) and events[j][1] != hop:
                    j += 1
                if j == len(events):
                    break
                stamps.append((events[j][0] - t0) * 1e6)
                if hop == "observe:cancel":
                    k = j
                    while k < len(events) and events[k][1] != "settle":
                        if events[k][1] == "step":
                            between[events[k][2].rsplit(".", 1)[-1][:60]] += 1
                        k += 1
                j += 1
            by_mode[mode].append(stamps)
    for mode in MODES:
        rows = [s for s in by_mode[mode] if len(s) == len(HOPS[mode])]
        print(f"\n{mode} ({len(rows)} trials): hop, median µs after the frame, median step µs")
        previous = [0.0] * len(rows)
        for h, hop in enumerate(HOPS[mode]):
            at = [r[h] for r in rows]
            step = [a - p for a, p in zip(at, previous, strict=True)]
            previous = at
            print(f"  {hop:16s} {statistics.median(at):8.0f} {statistics.median(step):8.0f}")
    print(f"\ntask steps between the adapter's Cancelled and settle ({n * 2} signals):")
    for name, count in between.most_common():
        print(f"  {count:5d} {name}")


if __name__ == "__main__":
    main()
