"""The terminal table and the `--json` file."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from typing import Any

from ._bare import CLOSE_BUSY, CLOSE_IDLE
from ._mass import FLOOR_WAVE, MASS, WAVE
from ._results import Row
from ._run import Report
from ._tier import CPU_PER_ROOM, RSS_PER_ROOM

__all__ = ["floor_ratios", "ratios", "table", "write_json"]

PAIRS: tuple[tuple[str, str, str, str], ...] = (
    ("start-up", "connected → all rooms joined", "connected → all rooms joined", "p50"),
    ("start-up", "connected → all rooms synced", "connected → all rooms synced", "p50"),
    ("start-up", CPU_PER_ROOM, CPU_PER_ROOM, "p50"),
    ("start-up", RSS_PER_ROOM, RSS_PER_ROOM, "p50"),
    (MASS, WAVE, FLOOR_WAVE, "p99"),
    ("teardown", "SIGTERM → exit, rooms busy", CLOSE_BUSY, "own"),
    ("teardown", "SIGTERM → exit, rooms idle", CLOSE_IDLE, "p50"),
)
"""(scenario, a runtime's metric, the bare client's metric beside it, the statistic
compared): the scale rows over their floor. `own` is the busy teardown's excess over
its 1 s tail (`Row.own_p50_ms`) against the floor's marks and close."""


def _ms(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3f}"


def table(report: Report) -> str:
    """Every row, grouped by scenario and size, then the ratios band-sdk / band-trio."""
    head = (
        "| runtime | scenario | rooms | metric | n | fail | p50 ms | p90 ms | p99 ms | max ms "
        "| floor p50 ms | own p50 ms | leaked tasks |"
    )
    lines = [head, "|" + "---|" * 4 + "---:|" * 9]
    rows = sorted(report.rows, key=lambda r: (_order(r.scenario), r.rooms, r.metric, r.runtime))
    for r in rows:
        floor = f"{_ms(r.floor_p50_ms)} ({r.floor})" if r.floor else "-"
        leaked = "-" if r.leaked_tasks is None else str(r.leaked_tasks)
        lines.append(
            f"| {r.runtime} | {r.scenario} | {r.rooms} | {r.metric} | {r.n} | {r.failures} | "
            f"{_ms(r.p50_ms)} | {_ms(r.p90_ms)} | {_ms(r.p99_ms)} | {_ms(r.max_ms)} | "
            f"{floor} | {_ms(r.own_p50_ms)} | {leaked} |"
        )
    if report.skipped:
        lines += ["", *(f"not run: {why}" for why in report.skipped)]
    if report.notes:
        lines += ["", *(f"note: {note}" for note in report.notes)]
    compared = ratios(report.rows)
    if compared:
        lines += [
            "",
            "| scenario | rooms | metric | band-trio own p50 ms | band-sdk own p50 ms "
            "| ratio (own) band-sdk / band-trio | ratio (total) band-sdk / band-trio |",
        ]
        lines.append("|---|---:|---|---:|---:|---:|---:|")
        for c in compared:
            lines.append(
                f"| {c['scenario']} | {c['rooms']} | {c['metric']} | {_ms(c['trio_own_ms'])} | "
                f"{_ms(c['sdk_own_ms'])} | {_ratio(c['own_ratio'])} | {_ratio(c['total_ratio'])} |"
            )
        lines += [
            "",
            "own = p50 - floor p50. A ratio is band-sdk's time over band-trio's: above 1: "
            "band-trio took less time (2.0x: half as long).",
        ]
    lines += _floor_table(report)
    return "\n".join(lines)


def _floor_table(report: Report) -> list[str]:
    lines = [
        "",
        f"join window (Policy.join_window, the agents' default): {report.join_window}; "
        "the platform: `band-trio platform`'s defaults (its request log longer, for the watch)",
    ]
    if any(r.unit != "ms" for r in report.rows):
        lines.append("rows with a unit in their name (KiB) carry it in the ms columns")
    compared = floor_ratios(report.rows)
    if not compared:
        return lines
    lines += [
        "",
        "| runtime | scenario | rooms | metric | runtime | floor: bare client | floor "
        "| runtime / floor |",
        "|---|---|---:|---|---:|---|---:|---:|",
    ]
    for c in compared:
        lines.append(
            f"| {c['runtime']} | {c['scenario']} | {c['rooms']} | {c['metric']} "
            f"({c['statistic']}) | {_ms(c['value'])} | {c['floor_metric']} ({c['statistic']}) "
            f"| {_ms(c['floor'])} | {_ratio(c['ratio'])} |"
        )
    lines += [
        "",
        "runtime / floor: the runtime's figure over the bare client's, from the same run "
        "(1.0x: as close as a bare client). own = the busy teardown's p50 less its 1 s tail; "
        "the floor's `own` is its p50. ms, except per room: CPU ms, RSS KiB.",
    ]
    return lines


def _ratio(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1f}x"


_SCENARIO_ORDER = (
    "floor",
    "interrupt",
    "agent interrupt: all busy",
    "agent interrupt",
    "stop",
    "play",
    "remote stop",
    "start-up",
    "teardown",
)


def _order(scenario: str) -> int:
    for i, prefix in enumerate(_SCENARIO_ORDER):
        if scenario.startswith(prefix):
            return i
    return len(_SCENARIO_ORDER)


def ratios(rows: tuple[Row, ...]) -> list[dict[str, Any]]:
    """band-sdk / band-trio for every metric both ran: of the own part and of the total."""
    by_key = {(r.runtime, r.scenario, r.rooms, r.metric): r for r in rows}
    out = []
    for (runtime, scenario, rooms, metric), trio_row in sorted(
        by_key.items(), key=lambda kv: (_order(kv[0][1]), kv[0][2], kv[0][3])
    ):
        if runtime != "band-trio":
            continue
        sdk_row = by_key.get(("band-sdk", scenario, rooms, metric))
        if sdk_row is None:
            continue
        out.append(
            {
                "scenario": scenario,
                "rooms": rooms,
                "metric": metric,
                "trio_own_ms": _own(trio_row),
                "sdk_own_ms": _own(sdk_row),
                "own_ratio": _div(_own(sdk_row), _own(trio_row)),
                "total_ratio": _div(sdk_row.p50_ms, trio_row.p50_ms),
            }
        )
    return out


def floor_ratios(rows: tuple[Row, ...]) -> list[dict[str, Any]]:
    """Each runtime's scale rows over the bare client's at the same size (`PAIRS`)."""
    by_key = {(r.runtime, r.scenario, r.rooms, r.metric): r for r in rows}
    out = []
    for scenario, metric, floor_metric, statistic in PAIRS:
        for (runtime, scen, rooms, name), row in sorted(by_key.items(), key=lambda kv: kv[0][2]):
            if runtime == "floor" or scen != scenario or name != metric:
                continue
            floor = by_key.get(("floor", scenario, rooms, floor_metric))
            if floor is None:
                continue
            value, against = _statistic(row, statistic), _statistic(floor, statistic)
            out.append(
                {
                    "runtime": runtime,
                    "scenario": scenario,
                    "rooms": rooms,
                    "metric": metric,
                    "statistic": statistic,
                    "value": value,
                    "floor_metric": floor_metric,
                    "floor": against,
                    "ratio": _div(value, against),
                    "unit": row.unit,
                }
            )
    return out


def _statistic(row: Row, statistic: str) -> float:
    if statistic == "p99":
        return row.p99_ms
    if statistic == "own":
        return _own(row)
    return row.p50_ms


def _own(row: Row) -> float:
    return row.own_p50_ms if row.own_p50_ms is not None else row.p50_ms


def _div(a: float, b: float) -> float | None:
    if math.isnan(a) or math.isnan(b) or b <= 0:
        return None
    return a / b


def machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }


def write_json(report: Report, path: str) -> None:
    data = {
        "machine": machine(),
        "quick": report.options.trials < 20,
        "options": {
            "trials": report.options.trials,
            "rooms": list(report.options.rooms),
            "idle_rooms": list(report.options.idle_rooms),
            "peer": report.options.peer,
            "load_rate": report.options.load_rate,
            "scale_floor": report.options.scale_floor,
            "mass_trials": report.options.mass_trials,
            "join_window": report.join_window,
            "platform": "band-trio platform's defaults; request log 500,000 entries",
        },
        "seconds": report.seconds,
        "floors_ms": report.floors_ms,
        "log_entries_lost": report.log_entries_lost,
        "skipped": list(report.skipped),
        "notes": list(report.notes),
        "results": [r.as_json() for r in report.rows],
        "ratios": ratios(report.rows),
        "floor_ratios": floor_ratios(report.rows),
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
