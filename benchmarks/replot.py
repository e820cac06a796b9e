"""Draw a recorded `band-trio bench --json` run again, with the current plot.

    .venv/bin/python benchmarks/replot.py docs/images/bench.json docs/images/bench.png

The JSON keeps every sample, so a change to the plot (its axes, its labels) need
not cost a new run of the bench; the figures are those of the recorded run.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import fields
from typing import Any

from band_trio.bench import Options, Report, Row, plot


def row(data: dict[str, Any]) -> Row:
    values = {f.name: data.get(f.name) for f in fields(Row)}
    for name in ("p50_ms", "p90_ms", "p99_ms", "max_ms"):
        values[name] = math.nan if values[name] is None else values[name]
    values["samples_ms"] = tuple(data.get("samples_ms") or ())
    values["notes"] = tuple(data.get("notes") or ())
    return Row(**values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", help="a file `band-trio bench --json FILE` wrote")
    parser.add_argument("png", help="where to draw it")
    args = parser.parse_args()
    with open(args.json, encoding="utf-8") as f:
        data = json.load(f)
    report = Report(
        options=Options.full(peer=data["options"]["peer"]),
        rows=tuple(row(r) for r in data["results"]),
        floors_ms=data["floors_ms"],
        log_entries_lost=data["log_entries_lost"],
        seconds=data["seconds"],
    )
    plot(report, args.png)


if __name__ == "__main__":
    main()
