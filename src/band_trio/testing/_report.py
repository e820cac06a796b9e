"""The kit's results as a table, for the CLI and the pytest plugin alike."""

from __future__ import annotations

from ._kit import ProbeResult

__all__ = ["table"]


def table(results: list[ProbeResult]) -> str:
    """A markdown table: probe, result, measured latency, what was observed."""
    lines = ["| probe | result | latency | observed |", "|---|---|---:|---|"]
    for result in results:
        latency = "" if result.latency is None else f"{result.latency * 1000:.1f} ms"
        lines.append(f"| {result.name} | {result.outcome} | {latency} | {result.observed} |")
    return "\n".join(lines)
