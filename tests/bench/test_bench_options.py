"""`band-trio bench --scale`: the scale rows alone, as docs/reference/cli.md says."""

from __future__ import annotations

import argparse

from band_trio.bench._run import _chosen, _steps
from band_trio.cli._bench import _options, add_parser


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    return parser.parse_args(["bench", *argv])


def test_scale_runs_start_up_teardown_and_the_mass_abort_only() -> None:
    options = _options(parse("--scale"))
    assert options.rooms == (1000,)
    assert options.idle_rooms == (1000, 10_000)
    assert [name for name, *_ in _chosen(options)] == [
        "agent interrupt",
        "agent interrupt: all busy",
    ]
    assert options.remote_trials == 0  # no remote stops, no peers
    assert options.scale_floor and options.mass_trials == 5
    # the progress bar's count: the floors, the trials (the mass abort's for band-trio and
    # the bare client), two start/stop steps per tier and player (band-trio, the floor)
    per_tier = options.trials + 2 * options.mass_trials + 2 * 2
    assert _steps(options, 1) == 1 + per_tier + 2 * 2 * 2


def test_scale_takes_the_size_flags() -> None:
    options = _options(parse("--scale", "--rooms", "100", "--idle-rooms", "500", "--trials", "3"))
    assert (options.rooms, options.idle_rooms, options.trials) == ((100,), (500,), 3)
    assert options.mass_trials == 3  # at most --trials
    assert "agent interrupt: all busy" in [name for name, *_ in _chosen(options)]


def test_without_a_preset_every_scenario_but_the_mass_abort_runs() -> None:
    options = _options(parse())
    assert not options.scale_floor
    names = [name for name, *_ in _chosen(options)]
    assert names == [
        "interrupt",
        "agent interrupt",
        "stop, play",
        "interrupt: approval wait",
        "remote stop: command",
    ]
