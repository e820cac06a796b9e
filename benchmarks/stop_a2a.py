"""Signal → the A2A peer sees the stop, for the A2A adapter.

    .venv/bin/python benchmarks/stop_a2a.py --trials 20 [--json]

The embedded platform and a band-trio agent running `A2AAdapter` share one
process (one trio run); the peer is the a2a-sdk 1.3.0 server in its own
process (src/band_trio/bench/_peers/a2a_server.py), streaming a long answer 20 ms a chunk.
Each trial waits until a fresh task has streamed 2 chunks, then sends an
interrupt (or a stop) for the room. A stop trial then plays the room and
interrupts the replayed answer, so every trial starts from an idle room. A
last section does the same with a non-streaming adapter (`SendMessage` with
`returnImmediately`, then `GetTask` every 50 ms).

The start of every interval is the platform's stamp of the outgoing
`agent.control` frame (its websocket writer logs it just before the send);
the ends are the peer's records: its ASGI middleware's stamp of the
`CancelTask` request arriving (`cancel_request`) and its task store's stamp
of the task saved `TASK_STATE_CANCELED` (`terminal`). All are
`time.perf_counter()`, which is CLOCK_MONOTONIC on Linux, so the stamps of
the two processes are comparable. `stop took` is the adapter's own record:
`CancelTask` sent → its answer read (`RemoteStop.took`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import control_frame_after, run_cli

from band_trio import Agent, Turn
from band_trio.adapters import A2AAdapter
from band_trio.contract import RemoteStop
from band_trio.platform import Platform, open_platform
from peers import Peer, a2a_peer

WAIT = 20.0
TEXT = "mode=normal chunks=2000 delay=0.02"


class Recorded(A2AAdapter):
    """The adapter, keeping each turn's remote stops by message id."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stops: dict[str, list[RemoteStop]] = {}

    async def on_turn(self, turn: Turn) -> None:
        try:
            await super().on_turn(turn)
        finally:
            self.stops.setdefault(turn.message.id, []).extend(turn.remote_stops)


async def streaming(peer: Peer, since: int, chunks: int = 2) -> str:
    """Wait for a new task (after event `since`) to have streamed `chunks` chunks; its id."""
    started = await peer.wait_for(timeout=WAIT, since=since, event="execute_started")
    task_id = str(started["task_id"])
    await peer.wait_for(
        lambda e: e["index"] >= chunks - 1, timeout=WAIT, event="chunk_sent", task_id=task_id
    )
    return task_id


class Bench:
    def __init__(self, platform: Platform, peer: Peer, room: str, user: str) -> None:
        self.platform = platform
        self.peer = peer
        self.room = room
        self.user = user
        info = platform.info
        assert info.agent_id
        self.agent_id = info.agent_id
        self.rows: dict[str, list[float]] = {}

    def add(self, name: str, seconds: float) -> None:
        self.rows.setdefault(name, []).append(seconds)

    def processed(self, message: str) -> Callable[[], bool]:
        return lambda: self.platform.delivery(message)[self.agent_id]["status"] == "processed"

    async def signal(self, mode: str, task_id: str) -> tuple[float, float, float]:
        """Send `mode` to the room; the control frame's, the CancelTask's and the
        CANCELED state's stamps."""
        mark = self.platform.request_log.next_seq
        self.platform.send_control(self.agent_id, mode, room_id=self.room, reason="benchmark")  # type: ignore[arg-type]
        cancel = await self.peer.wait_for(timeout=WAIT, event="cancel_request", task_id=task_id)
        terminal = await self.peer.wait_for(timeout=WAIT, event="terminal", task_id=task_id)
        assert terminal["state"] == "TASK_STATE_CANCELED", terminal
        await self.platform.wait_until(lambda: control_frame_after(self.platform, mark) is not None)
        sent = control_frame_after(self.platform, mark)
        assert sent is not None
        return sent, float(cancel["perf"]), float(terminal["perf"])

    def record(self, label: str, stamps: tuple[float, float, float], stop: RemoteStop) -> None:
        sent, cancel, terminal = stamps
        assert stop.outcome.value == "confirmed", stop
        self.add(f"{label}: control frame → peer receives CancelTask", cancel - sent)
        self.add(f"{label}: control frame → peer saves CANCELED", terminal - sent)
        self.add(f"{label}: stop took (CancelTask → its answer)", stop.took)

    async def interrupts(self, agent: Agent, adapter: Recorded, label: str, trials: int) -> None:
        for trial in range(trials):
            since = self.peer.mark()
            message = self.platform.post_message(self.room, self.user, f"{TEXT} i{trial}")
            task_id = await streaming(self.peer, since)
            stamps = await self.signal("interrupt", task_id)
            await self.platform.wait_until(self.processed(message))
            await agent.wait_until(lambda: self.room_idle(agent))
            self.record(f"{label} interrupt", stamps, adapter.stops[message][-1])

    async def stops(self, agent: Agent, adapter: Recorded, label: str, trials: int) -> None:
        for trial in range(trials):
            since = self.peer.mark()
            message = self.platform.post_message(self.room, self.user, f"{TEXT} s{trial}")
            task_id = await streaming(self.peer, since)
            stamps = await self.signal("stop", task_id)
            await agent.wait_until(lambda: self.room_idle(agent))
            self.record(f"{label} stop", stamps, adapter.stops[message][-1])
            since = self.peer.mark()
            self.platform.send_control(self.agent_id, "play", room_id=self.room)
            replayed = await streaming(self.peer, since, chunks=1)
            await self.signal("interrupt", replayed)
            await self.platform.wait_until(self.processed(message))
            await agent.wait_until(lambda: self.room_idle(agent))

    def room_idle(self, agent: Agent) -> bool:
        room = agent.rooms.get(self.room)
        return room is not None and room.running is None


def new_agent(platform: Platform, adapter: Recorded) -> Agent:
    info = platform.info
    assert info.agent_id and info.api_key
    return Agent(
        adapter, agent_id=info.agent_id, api_key=info.api_key, rest_url=info.rest_url,
        ws_url=info.ws_url,
    )  # fmt: skip


async def main(trials: int) -> dict[str, list[float]]:
    async with a2a_peer() as peer, open_platform(seed=True) as platform:
        info = platform.info
        assert info.room_id and info.user_id
        bench = Bench(platform, peer, info.room_id, info.user_id)
        for label, streamed in (("streamed", True), ("polled", False)):
            adapter = Recorded(peer.url, streaming=streamed, poll_interval=0.05)
            agent = new_agent(platform, adapter)
            async with trio.open_nursery() as nursery:
                await nursery.start(agent.run)
                await bench.interrupts(agent, adapter, label, trials)
                if streamed:
                    await bench.stops(agent, adapter, label, trials)
                await agent.stop()
    return bench.rows


if __name__ == "__main__":
    run_cli(main, "{trials} trials per row; a2a-sdk 1.3.0 streaming 20 ms a chunk", __doc__)
