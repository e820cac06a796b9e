"""The scale floor in `band-trio bench --scale`: the bare client, and its rows over it.

The bare client (`_scale_floor`, a process of its own) runs against the embedded
platform in 20 rooms, as the bench drives it at every size; its rows come from
the platform's stamps like an agent's. The report's runtime / floor rows are
checked on rows made up for it.
"""

from __future__ import annotations

import math

import pytest
import trio

from band_trio.bench._bare import CLOSE_BUSY, close_bare, open_bare
from band_trio.bench._bench import Bench, Options
from band_trio.bench._mass import FLOOR_WAVE, MASS, WAVE, floor_wave
from band_trio.bench._progress import Progress
from band_trio.bench._report import floor_ratios, table
from band_trio.bench._results import Row, Series
from band_trio.bench._run import Report
from band_trio.bench._tier import CPU_PER_ROOM, RSS_PER_ROOM, create_identity
from band_trio.bench._watch import LogWatch
from band_trio.platform import open_platform
from band_trio.policy import PlatformPolicy

ROOMS = 20


@pytest.mark.timeout(60)
async def test_the_bare_client_starts_up_marks_at_once_and_closes() -> None:
    options = Options.scale()
    async with open_platform(seed=True, policy=PlatformPolicy(log_entries=50_000)) as platform:
        user = platform.info.user_id
        assert user is not None
        bench = Bench(platform, LogWatch(platform), user, options, Progress(0, enabled=False))
        identity = create_identity(bench, "floor", ROOMS, "floor-test")
        with trio.fail_after(45):
            async with trio.open_nursery() as nursery:
                bare = await open_bare(bench, nursery, identity)
                assert bare.ready, bare.subject.stderr_tail
                await floor_wave(bare)
                await floor_wave(bare)
                position = platform.request_log.next_seq
                await close_bare(bare, busy=True)
        assert bare.subject.process.returncode == 0, bare.subject.stderr_tail
        # the busy teardown's floor settles each busy room as a turn that ends: its
        # reply, its mark, then working: false, in that order
        settled: dict[str, list[str]] = {}
        for entry in platform.log(position):
            if entry.kind == "rest" and entry.agent_id == identity.agent_id:
                room = (entry.path or "").split("/chats/")[1].split("/")[0]
                last = (entry.path or "").rsplit("/", 1)[1]
                settled.setdefault(room, []).append(f"{entry.method} {last}")
        assert set(settled) == set(identity.rooms[1:])
        for steps in settled.values():
            assert steps == ["POST processing", "POST messages", "POST processed", "POST activity"]
    rows = {(r.scenario, r.metric): r for r in (Row.of(s, {}, None) for s in bench.series.values())}
    assert all(r.failures == 0 for r in rows.values()), [r.notes for r in rows.values()]
    assert {r.runtime for r in rows.values()} == {"floor"}
    joined = rows[("start-up", "connected → all rooms joined")].p50_ms
    synced = rows[("start-up", "connected → all rooms synced")].p50_ms
    assert 0 < joined < synced < 30_000  # a room's /next goes after its last join's reply
    launched = rows[("start-up", "launched → connected")].p50_ms
    assert rows[("start-up", "launched → all rooms synced")].p50_ms == pytest.approx(
        launched + synced, abs=0.01
    )
    assert rows[("start-up", CPU_PER_ROOM)].p50_ms > 0
    assert rows[("start-up", RSS_PER_ROOM)].unit == "KiB"
    assert 10 < rows[("start-up", RSS_PER_ROOM)].p50_ms < 100_000  # KiB per room of 20
    wave = rows[(MASS, FLOOR_WAVE)]
    assert wave.n == 2 * ROOMS and 0 < wave.p50_ms <= wave.p99_ms <= wave.max_ms < 30_000
    closed = rows[("teardown", CLOSE_BUSY)]
    assert closed.n == 1 and closed.p50_ms > 0
    assert bench.watch.lost == 0


def _row(runtime: str, scenario: str, metric: str, samples: list[float], **kw: object) -> Row:
    series = Series(runtime, scenario, 1000, metric, **kw)  # type: ignore[arg-type]
    series.samples.extend(samples)
    floors = {"tail:1.0": 1000.0}
    return Row.of(series, floors, None)


def test_each_scale_row_is_reported_over_the_bare_clients() -> None:
    rows = (
        _row("band-trio", "start-up", "connected → all rooms synced", [2.0]),
        _row("floor", "start-up", "connected → all rooms synced", [1.0]),
        _row("band-trio", "start-up", RSS_PER_ROOM, [90.0], unit="KiB"),
        _row("floor", "start-up", RSS_PER_ROOM, [30.0], unit="KiB"),
        _row("band-trio", MASS, WAVE, [i / 1000 for i in range(1, 101)]),
        _row("floor", MASS, FLOOR_WAVE, [i / 2000 for i in range(1, 101)]),
        _row("band-trio", "teardown", "SIGTERM → exit, rooms busy", [1.5], floor="tail:1.0"),
        _row("floor", "teardown", CLOSE_BUSY, [0.25]),
        _row("band-trio", "start-up", "connected → all rooms joined", [1.0]),  # no floor row
    )
    compared = {(c["scenario"], c["metric"]): c for c in floor_ratios(rows)}
    assert set(compared) == {
        ("start-up", "connected → all rooms synced"),
        ("start-up", RSS_PER_ROOM),
        (MASS, WAVE),
        ("teardown", "SIGTERM → exit, rooms busy"),
    }
    assert compared[("start-up", "connected → all rooms synced")]["ratio"] == pytest.approx(2.0)
    assert compared[("start-up", RSS_PER_ROOM)]["ratio"] == pytest.approx(3.0)
    mass = compared[(MASS, WAVE)]
    assert mass["statistic"] == "p99" and mass["ratio"] == pytest.approx(2.0)
    busy = compared[("teardown", "SIGTERM → exit, rooms busy")]
    assert busy["value"] == pytest.approx(500.0)  # its excess over the 1 s tail
    assert busy["ratio"] == pytest.approx(2.0)
    assert all(not math.isnan(c["ratio"]) for c in compared.values())
    report = Report(options=Options.scale(), rows=rows, floors_ms={}, log_entries_lost=0, seconds=1)
    shown = table(report)
    assert "runtime / floor" in shown and "join window (Policy.join_window" in shown
    assert f"| band-trio | {MASS} | 1000 | {WAVE} (p99) |" in shown
