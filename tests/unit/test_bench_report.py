"""The bench's table and plot read plainly: units in the header, the ratio's direction
stated, log axes labelled 0.5, 1, 2, 5, 10 ms rather than "5 x 10^-1" or "10^0"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from band_trio.bench import Options, Report, Row, table
from band_trio.bench._plot import figure, log_ticks, plot

PLAIN = re.compile(r"^\d[\d,]*(\.\d+)?$")


def row(runtime: str, samples: tuple[float, ...], floor: float = 0.58) -> Row:
    ordered = tuple(sorted(samples))
    return Row(
        runtime=runtime,
        scenario="interrupt",
        rooms=1,
        metric="signal → adapter cancelled",
        n=len(ordered),
        failures=0,
        p50_ms=ordered[len(ordered) // 2],
        p90_ms=ordered[-2],
        p99_ms=ordered[-1],
        max_ms=ordered[-1],
        floor="push",
        floor_p50_ms=floor,
        own_p50_ms=ordered[len(ordered) // 2] - floor,
        leaked_tasks=0,
        samples_ms=ordered,
    )


def report(*rows: Row) -> Report:
    return Report(
        options=Options.quick(), rows=rows, floors_ms={"push": 0.58}, log_entries_lost=0, seconds=1
    )


BOTH = report(
    row("band-trio", (0.7, 0.8, 0.9, 1.2, 3.5)), row("band-sdk", (1.0, 1.1, 1.3, 2.0, 4.0))
)


def test_the_tables_say_their_units_and_which_way_a_ratio_is_taken() -> None:
    lines = table(BOTH).splitlines()
    head = lines[0]
    for column in ("p50 ms", "p90 ms", "p99 ms", "max ms", "floor p50 ms", "own p50 ms"):
        assert f"| {column} |" in head, head
    ratio_head = next(line for line in lines if "ratio" in line)
    assert "ratio (own) band-sdk / band-trio" in ratio_head, ratio_head
    assert "band-trio own p50 ms" in ratio_head and "band-sdk own p50 ms" in ratio_head
    said = "\n".join(lines)
    assert "above 1: band-trio took less time" in said, said


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (0.7, 40.0, [1, 2, 5, 10, 20]),
        (0.58, 4.0, [0.6, 0.8, 1, 1.5, 2, 3, 4]),
        (1.1, 1.9, [1.2, 1.4, 1.6, 1.8]),
        (300.0, 17000.0, [500, 1000, 2000, 5000, 10000]),
        (0.95, 345.0, [1, 2, 5, 10, 20, 50, 100, 200]),
        (0.05, 20000.0, [0.1, 1, 10, 100, 1000, 10000]),
    ],
)
def test_log_ticks_are_round_numbers_in_the_range(
    low: float, high: float, ticks: list[float]
) -> None:
    assert log_ticks(low, high) == pytest.approx(ticks)


def test_the_plot_labels_its_log_axes_with_plain_numbers(tmp_path: Path) -> None:
    drawn = figure(BOTH)
    drawn.canvas.draw()
    for axis in drawn.axes:
        major = [t.get_text() for t in axis.get_xticklabels()]
        minor = [t.get_text() for t in axis.get_xticklabels(minor=True)]
        assert major and all(PLAIN.match(text) for text in major), major
        assert not any(minor), minor
        assert axis.get_xlabel() == "ms"
    plot(BOTH, str(tmp_path / "bench.png"))
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
