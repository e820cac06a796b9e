"""`band-trio agent --metrics … --log-format json` as a real process, driven through a
scripted sequence — 3 turns, 1 interrupt, 1 stop and play, 1 reconnect — with
`/metrics` scraped over a real socket before and after: every counter moved by
exactly what happened, and nothing else moved. Its stderr, parsed line by line,
is one JSON object a line carrying the lifecycle of each step."""

from __future__ import annotations

from collections.abc import Callable

import trio
from observed_process import command, delta

from band_trio.platform import Platform
from support import agent_env, all_processed, status

DEADLINE = 30
ADAPTER = ["--adapter", "observed_adapter:make"]


def has(text: str) -> Callable[[str], bool]:
    return lambda line: text in line


def holding(message_id: str) -> Callable[[str], bool]:
    """The adapter's own line once its remote work is started (it carries the id)."""
    return lambda line: f"holding {message_id}" in line


async def test_every_counter_moves_by_exactly_what_happened(platform: Platform) -> None:
    info = platform.info
    agent_id, room, user = info.agent_id, info.room_id, info.user_id
    assert agent_id and room and user
    args = ["--log-level", "INFO", "--log-format", "json", "agent", *ADAPTER]
    with trio.fail_after(DEADLINE):
        async with command(*args, "--metrics", "127.0.0.1:0", env=agent_env(platform)) as agent:
            lines = agent.stderr
            await lines.wait_for(has("joined 1 room(s) of 1"))
            before = await agent.metrics()

            hellos = [platform.post_message(room, user, f"hello {n}") for n in range(3)]
            await platform.wait_until(all_processed(platform, hellos))

            interrupted = platform.post_message(room, user, "hold")
            await lines.wait_for(holding(interrupted))
            correlation = platform.send_control(agent_id, "interrupt", room_id=room)
            await platform.wait_until(lambda: status(platform, interrupted) == "processed")

            # the platform's stop reaches a turn two ways: the signal, and the answer to its
            # next `working: true`; so the stop goes out once this turn's first one was
            # answered (after the last turn's `working: false`), or it may come as the
            # answer (`platform_stop`) before the signal does
            working = lambda: platform.working.get((agent_id, room), False)  # noqa: E731
            await platform.wait_until(lambda: not working())
            stopped = platform.post_message(room, user, "hold")
            await lines.wait_for(holding(stopped))
            await platform.wait_until(working)
            platform.send_control(agent_id, "stop", room_id=room, reason="wait")
            await lines.wait_for(has(f"turn for {stopped} ended: aborted"))
            platform.send_control(agent_id, "play", room_id=room)
            await platform.wait_until(lambda: status(platform, stopped) == "processed")

            assert platform.faults.drop_socket(agent_id)
            await lines.wait_for(has("joined 1 room(s) of 1"), count=2)
            after = await agent.metrics()

    assert delta(before, after, "band_trio_turns_total") == {
        'band_trio_turns_total{outcome="succeeded"}': 4,  # three hellos and the replay
        'band_trio_turns_total{outcome="aborted"}': 2,
    }
    durations = delta(before, after, "band_trio_turn_duration_seconds_count")
    assert durations == {
        'band_trio_turn_duration_seconds_count{outcome="succeeded"}': 4,
        'band_trio_turn_duration_seconds_count{outcome="aborted"}': 2,
    }
    assert delta(before, after, "band_trio_signal_cancel_seconds_count") == {
        'band_trio_signal_cancel_seconds_count{kind="interrupt"}': 1,
        'band_trio_signal_cancel_seconds_count{kind="stop"}': 1,
    }
    latency = 'band_trio_signal_cancel_seconds_bucket{kind="interrupt",le="1.0"}'
    assert after[latency] - before[latency] == 1  # cancelled within a second
    assert delta(before, after, "band_trio_signals_total") == {
        'band_trio_signals_total{mode="interrupt",result="applied"}': 1,
        'band_trio_signals_total{mode="stop",result="applied"}': 1,
        'band_trio_signals_total{mode="play",result="applied"}': 1,
    }
    assert delta(before, after, "band_trio_remote_stops_total") == {
        'band_trio_remote_stops_total{outcome="confirmed"}': 2,
    }
    assert delta(before, after, "band_trio_reconnects_total") == {
        'band_trio_reconnects_total{reason="dropped"}': 1,  # a TCP cut, no close frame
    }
    assert delta(before, after, "band_trio_connects_total") == {"band_trio_connects_total{}": 1}
    for unmoved in ("band_trio_forwards", "band_trio_runs", "band_trio_threads_abandoned"):
        assert delta(before, after, unmoved) == {}, unmoved
    for gauges in (before, after):
        assert gauges["band_trio_rooms{}"] == 1
        assert gauges["band_trio_rooms_joined{}"] == 1
        assert gauges["band_trio_connected{}"] == 1
        assert gauges['band_trio_in_progress{work="turn"}'] == 0
        assert gauges['band_trio_queue_depth{queue="messages"}'] == 0

    records = agent.stderr.records()  # every line but the command's own notices is JSON
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert not [r for r in records if r["logger"].startswith("httpx")]  # at DEBUG only
    started = [r for r in records if r["message"].endswith("started")]
    assert {r["message_id"] for r in started} == {*hellos, interrupted, stopped}
    assert all(r["room"] == room and r["logger"] == "band_trio.runtime.turn" for r in started)
    ended = {r["message_id"]: r for r in records if " ended: " in r["message"]}
    assert "ended: aborted in " in ended[interrupted]["message"]
    assert ended[interrupted]["correlation_id"] == correlation
    applied = [r for r in records if " applied to " in r["message"]]
    assert [r["message"].split()[0] for r in applied] == ["interrupt", "stop", "play"]
    assert applied[0]["correlation_id"] == correlation
    stops = [r for r in records if "remote stop of hold" in r["message"]]
    assert [r["message_id"] for r in stops] == [interrupted, stopped]
    assert stops[0]["correlation_id"] == correlation
    held = [r for r in records if r["logger"] == "observed"]  # the adapter's own lines
    assert [(r["room"], r["message_id"]) for r in held] == [(room, interrupted), (room, stopped)]
    (reconnect,) = [r for r in records if r["message"].startswith("reconnecting in ")]
    assert reconnect["message"].endswith(": dropped")
    connected = [r for r in records if r["message"].startswith("connected to ")]
    assert len(connected) == 2 and all(agent_id in r["message"] for r in connected)
