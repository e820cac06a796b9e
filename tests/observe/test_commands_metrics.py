"""`--metrics` on `bridge`, `host` and `runs-api`, each a real process scraped over a
real socket: the unit of work it does (a forward, a turn, a run) is counted, and its
gauges sample what it holds."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import trio
from observed_process import Command, command, delta

from band_trio.platform import Platform
from band_trio.testing import open_recording_target
from support import agent_env, seeded, status

DEADLINE = 30
TOKEN = "metrics-token-0123456789"
KEY = "metrics-key-0123456789abcdef"


async def test_the_bridge_counts_its_forwards(platform: Platform, tmp_path: Path) -> None:
    info = platform.info
    _, room, user = seeded(platform)
    async with open_recording_target() as target:
        config = tmp_path / "bridge.json"
        identity = {"agent_id": info.agent_id, "api_key": info.api_key,
                    "target": {"type": "http", "url": target.url}}  # fmt: skip
        bridge = {"rest_url": info.rest_url, "ws_url": info.ws_url}
        config.write_text(json.dumps({"bridge": bridge, "identity": [identity]}))
        args = ["bridge", "--config", str(config), "--metrics", "127.0.0.1:0"]
        with trio.fail_after(DEADLINE):
            async with command(*args) as bridge_process:
                await bridge_process.stderr.wait_for(lambda line: "ready:" in line)
                before = await bridge_process.metrics()
                message = platform.post_message(room, user, "through the bridge")
                await target.wait_until(lambda: message in target.message_ids())
                await platform.wait_until(lambda: status(platform, message) == "processed")
                # the forward's unit ends after its mark (then `working: false`)
                while not delta(before, after := await bridge_process.metrics(),
                                "band_trio_forwards_total"):  # fmt: skip
                    await trio.sleep(0.05)  # polling another process's state
    assert delta(before, after, "band_trio_forwards_total") == {
        'band_trio_forwards_total{outcome="delivered"}': 1
    }
    assert after['band_trio_forward_duration_seconds_count{outcome="delivered"}'] == 1
    assert delta(before, after, "band_trio_turns_total") == {}  # the bridge runs no turn
    assert after["band_trio_connected{}"] == 1
    assert after["band_trio_rooms{}"] == 1 and after["band_trio_rooms_joined{}"] == 1
    assert after['band_trio_in_progress{work="forward"}'] == 0


async def test_the_host_counts_its_turns(platform: Platform, tmp_path: Path) -> None:
    _, room, user = seeded(platform)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    env = {k: v for k, v in agent_env(platform).items() if k != "BAND_WS_URL"}
    args = ["host", "--adapter", "observed_adapter:make", "--listen", "127.0.0.1:0",
            "--token-file", str(token), "--metrics", "127.0.0.1:0"]  # fmt: skip
    with trio.fail_after(DEADLINE):
        async with command(*args, env=env) as host:
            serving = await host.stderr.wait_for(lambda line: "serving on" in line)
            url = serving[0].rsplit(" ", 1)[1]
            before = await host.metrics()
            message = platform.post_message(room, user, "through the host")
            envelope = forwarded(platform, message)
            async with httpx2.AsyncClient() as client:
                answer = await client.post(
                    url, json=envelope, headers={"authorization": f"Bearer {TOKEN}"}
                )
            assert answer.json() == {"outcome": "processed"}
            after = await host.metrics()
    assert delta(before, after, "band_trio_turns_total") == {
        'band_trio_turns_total{outcome="succeeded"}': 1
    }
    assert after["band_trio_rooms{}"] == 1
    assert after['band_trio_in_progress{work="turn"}'] == 0


async def test_the_runs_api_counts_its_runs() -> None:
    args = ["runs-api", "--api-key", KEY, "--adapter", "observed_adapter:make",
            "--metrics", "127.0.0.1:0"]  # fmt: skip
    with trio.fail_after(DEADLINE):
        async with command(*args) as runs:
            before = await runs.metrics()
            async with httpx2.AsyncClient(headers={"authorization": f"Bearer {KEY}"}) as client:
                base = await served_at(runs)
                started = await client.post(f"{base}/v1/runs", json={"input": "hello"})
                run_id = started.json()["run_id"]
                async with client.stream("GET", f"{base}/v1/runs/{run_id}/events") as events:
                    lines = [line async for line in events.aiter_lines()]  # ends after the run
                assert any("run.completed" in line for line in lines)
                held = await client.post(f"{base}/v1/runs", json={"input": "hold"})
                held_id = held.json()["run_id"]
                gauges = await runs.metrics()
                stopped = await client.post(f"{base}/v1/runs/{held_id}/stop?wait=true")
                assert stopped.json()["status"] == "cancelled"
            after = await runs.metrics()
    assert gauges['band_trio_in_progress{work="run"}'] == 1
    assert delta(before, after, "band_trio_runs_total") == {
        'band_trio_runs_total{status="completed"}': 1,
        'band_trio_runs_total{status="cancelled"}': 1,
    }
    assert delta(before, after, "band_trio_signal_cancel_seconds_count") == {
        'band_trio_signal_cancel_seconds_count{kind="stop"}': 1
    }
    assert after['band_trio_in_progress{work="run"}'] == 0


async def served_at(runs: Command) -> str:
    """The runs API's own URL, from the line it prints on stdout."""
    (line,) = await runs.stdout.wait_for(lambda line: "listening on" in line)
    return line.rsplit(" ", 1)[1]


def forwarded(platform: Platform, message_id: str) -> dict[str, object]:
    """The envelope the bridge would forward for `message_id`."""
    info = platform.info
    copy = next(m for m in platform.messages(info.room_id or "") if m.id == message_id)
    return {
        "event_type": "message_created",
        "agent_id": info.agent_id,
        "room_id": info.room_id,
        "payload": {
            "id": message_id,
            "content": copy.content,
            "message_type": "text",
            "sender_type": "User",
            "sender_id": info.user_id,
            "inserted_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z",
        },
        "forwarded_at": "2026-12-01T00:00:00Z",
    }
