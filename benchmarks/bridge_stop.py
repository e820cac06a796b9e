"""The bridge's stop, end to end: a signal in the room → the forward behind it stopped.

    .venv/bin/python benchmarks/bridge_stop.py --trials 30 [--json]

One process, one trio run, as benchmarks/signal_latency.py: the embedded
platform, `band-trio bridge` (one identity, the runtime's link), and on the
far side either a real HTTP target (hypercorn, `band_trio.testing.RecordingTarget`)
or the host (`HostApp` on hypercorn) running an adapter. Everything is on
loopback, so the numbers include every side's scheduling on one core.

Every interval starts at the platform's own stamp of the outgoing
`agent.control` frame (`benchmarks/_stopwatch.py`) and ends at:

* HTTP target, interrupt with one forward running: the target's server sees
  its request close (its ASGI `http.disconnect`). Production code carries no
  stamp for the benchmark: it observes from outside. (Until 2026-12-06 a second
  message waited behind it, and the interrupt cleared it; now it would be
  forwarded at once, in this same process, during the measurement.)
* host: the stop reaches the adapter behind the bridge (its `Cancelled`).

The floor, measured in the same run and interleaved with the trials: a client
cancelling an open request to the same target → the target sees the close
(no platform, no bridge: what a closed request costs on its own).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import time
from typing import Literal

import httpx2
import trio
from _stopwatch import control_frame_after

from band_trio import Adapter, Policy, Turn
from band_trio.bridge import Bridge, BridgeConfig, HttpTargetConfig, IdentityConfig
from band_trio.host import HostApp, serve_host
from band_trio.platform import Platform, open_platform
from band_trio.testing import RecordingTarget, open_recording_target

Settle = Literal["bridge", "target"]

WAIT = 10.0


class _Blocking(Adapter):
    """Waits until cancelled, and stamps the moment."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.cancelled_at: dict[str, float] = {}
        self.changes = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        self.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled_at[turn.message.id] = time.perf_counter()
            self.changes.set()
            raise


HOST_TOKEN = secrets.token_urlsafe(32)
"""The bearer token the benchmark's host requires and its bridge target sends."""


def _identity(platform: Platform, url: str, settle: Settle = "bridge") -> IdentityConfig:
    info = platform.info
    assert info.agent_id and info.api_key
    return IdentityConfig(
        name=info.agent_id,
        agent_id=info.agent_id,
        api_key=info.api_key,
        rest_url=info.rest_url,
        ws_url=info.ws_url,
        target=HttpTargetConfig(url=url, settle=settle, token=HOST_TOKEN),
    )


async def _ready(bridge: Bridge) -> None:
    (identity,) = bridge.identities.values()
    await bridge.wait_until(lambda: identity.link_connects > 0 and identity.rooms_idle)


async def _http_trial(
    platform: Platform, bridge: Bridge, target: RecordingTarget, rows: dict[str, list[float]]
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    (identity,) = bridge.identities.values()
    assert identity.rooms is not None
    room = identity.rooms.current[info.room_id]
    seen = len(target.received)
    target.hold = True
    running = platform.post_message(info.room_id, info.user_id, "running")
    await target.wait_until(lambda: running in target.message_ids()[seen:])
    mark = len(platform.log())
    platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
    received = target.received[seen]
    await received.closed.wait()
    target.release_all()
    await bridge.wait_until(lambda: room.idle)
    sent = control_frame_after(platform, mark)
    assert sent is not None and received.closed_at is not None
    rows.setdefault("HTTP: signal → running forward's request closed (target)", []).append(
        received.closed_at - sent
    )
    assert target.message_ids()[seen:] == [running], "forwarded again"


async def _close_floor(target: RecordingTarget, rows: dict[str, list[float]]) -> None:
    """A bare client cancelling an open request → the target sees the close."""
    seen = len(target.received)
    target.hold = True
    envelope = {
        "event_type": "room_added",
        "agent_id": "floor",
        "room_id": "floor",
        "payload": {},
        "forwarded_at": "2026-12-01T00:00:00Z",
    }
    async with httpx2.AsyncClient(timeout=None) as client, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: client.post(target.url, json=envelope))
        await target.wait_until(lambda: len(target.received) > seen)
        began = time.perf_counter()
        nursery.cancel_scope.cancel()
    received = target.received[seen]
    await received.closed.wait()
    target.hold = False
    assert received.closed_at is not None
    rows.setdefault("floor: cancel an open request → the target sees it close", []).append(
        received.closed_at - began
    )


async def _host_trial(
    platform: Platform, bridge: Bridge, adapter: _Blocking, rows: dict[str, list[float]]
) -> None:
    info = platform.info
    assert info.agent_id and info.room_id and info.user_id
    (identity,) = bridge.identities.values()
    adapter.started = trio.Event()
    message = platform.post_message(info.room_id, info.user_id, "work")
    await adapter.started.wait()
    await trio.sleep(0.05)  # pacing: the turn's `working: true` is out of the way
    mark = len(platform.log())
    platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
    while message not in adapter.cancelled_at:
        adapter.changes = trio.Event()
        await adapter.changes.wait()
    await bridge.wait_until(lambda: identity.rooms_idle)
    sent = control_frame_after(platform, mark)
    assert sent is not None
    rows.setdefault("host: signal → the adapter behind the bridge Cancelled", []).append(
        adapter.cancelled_at[message] - sent
    )


async def _run_bridge(bridge: Bridge, *, task_status: trio.TaskStatus[None]) -> None:
    await bridge.run(task_status=task_status)


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    policy = Policy()
    async with open_platform(seed=True) as platform, open_recording_target() as target:
        bridge = Bridge(BridgeConfig((_identity(platform, target.url),)), policy=policy)
        async with trio.open_nursery() as nursery:
            await nursery.start(_run_bridge, bridge)
            with trio.fail_after(WAIT):
                await _ready(bridge)
                await _http_trial(platform, bridge, target, {})  # warm-up
                await _close_floor(target, {})
            for _ in range(trials):
                with trio.fail_after(WAIT):
                    await _http_trial(platform, bridge, target, rows)
                    await _close_floor(target, rows)
            bridge.close()
    async with open_platform(seed=True) as platform, trio.open_nursery() as nursery:
        info = platform.info
        assert info.agent_id and info.api_key
        adapter = _Blocking()
        app = HostApp(adapter, agent_id=info.agent_id, token=HOST_TOKEN, policy=policy)
        stop = trio.Event()
        port = await nursery.start(
            lambda task_status: serve_host(
                app,
                api_key=info.api_key or "",
                rest_url=info.rest_url,
                host="127.0.0.1",
                port=0,
                stop=stop,
                task_status=task_status,
            )
        )
        bridge = Bridge(
            BridgeConfig((_identity(platform, f"http://127.0.0.1:{port}/", "target"),)),
            policy=policy,
        )
        await nursery.start(_run_bridge, bridge)
        with trio.fail_after(WAIT):
            await _ready(bridge)
            await _host_trial(platform, bridge, adapter, {})  # warm-up
        for _ in range(trials):
            with trio.fail_after(WAIT):
                await _host_trial(platform, bridge, adapter, rows)
        bridge.close()
        stop.set()
    return rows


def _table(rows: dict[str, list[float]]) -> str:
    lines = [
        "| interval | n | median ms | p90 | min | max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, samples in rows.items():
        ms = sorted(s * 1000 for s in samples)
        p90 = ms[min(len(ms) - 1, int(len(ms) * 0.9))]
        lines.append(
            f"| {name} | {len(ms)} | {statistics.median(ms):.2f} | {p90:.2f} | "
            f"{ms[0]:.2f} | {ms[-1]:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the samples as JSON")
    args = parser.parse_args()
    result = trio.run(main, args.trials)
    print(json.dumps(result) if args.json else _table(result))
