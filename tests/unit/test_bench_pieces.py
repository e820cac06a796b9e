"""The benchmark's small pieces: quantiles, the message commands, observation lines."""

from __future__ import annotations

import math

import pytest

from band_trio.bench._protocol import (
    BUSY,
    HOLD,
    TASKS,
    Command,
    command_script,
    parse_command,
    parse_observation,
)
from band_trio.bench._results import Row, Series, percentile


def test_percentile_interpolates_and_is_nan_for_nothing() -> None:
    assert math.isnan(percentile([], 0.5))
    assert percentile([1.0], 0.99) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 1.0) == 4.0
    assert percentile(list(map(float, range(101))), 0.9) == pytest.approx(90.0)


def test_commands_are_recognised_only_when_whole() -> None:
    assert parse_command(HOLD) == Command(HOLD)
    assert parse_command(f"{BUSY} 12.5") == Command(BUSY, "12.5")
    assert parse_command(TASKS) == Command(TASKS)
    assert parse_command(f"{HOLD}er") is None
    assert parse_command("hello") is None


def test_observation_lines_round_trip_and_junk_is_refused() -> None:
    seen = parse_observation('{"e": "tasks", "m": "m1", "t": 1.5, "n": 0}')
    assert seen is not None and seen.n == 0 and seen.t == 1.5
    for junk in ("", "not json", "[]", '{"e": "x"}', '{"e": "x", "m": "y", "t": "soon"}'):
        assert parse_observation(junk) is None


def test_command_script_quotes_the_fifo_path() -> None:
    argv = command_script("/tmp/it's here")
    assert argv[:2] == ["/bin/sh", "-c"]
    assert "'/tmp/it'\\''s here'" in argv[2]


def test_a_row_keeps_failures_out_of_the_percentiles_and_subtracts_the_floor() -> None:
    series = Series("band-trio", "interrupt", 1, "signal → adapter cancelled", "push")
    for seconds in (0.001, 0.002, 0.003):
        series.add(seconds)
    series.add(None, "no cancel")
    row = Row.of(series, {"push": 0.5}, leaked=0)
    assert (row.n, row.failures, row.notes) == (3, 1, ("no cancel",))
    assert row.p50_ms == pytest.approx(2.0)
    assert row.own_p50_ms == pytest.approx(1.5)
    assert row.as_json(samples=False)["samples_ms"] == []
