"""Signal → the model server's generator cancelled, for the OpenAI chat adapter.

    .venv/bin/python benchmarks/stop_openai.py --trials 20 [--json]

The embedded platform and a band-trio agent running `OpenAIChatAdapter` share
one process (one trio run); the model is a stubllm 0.1.5 server in its own
process (src/band_trio/bench/_peers/stubllm_server.py), streaming the 80-chunk `[slow]`
answer 50 ms a chunk. Each trial waits until the server has sent 3 chunks of
a fresh answer, then sends an interrupt (or a stop) for the room.

The start of every interval is the platform's stamp of the outgoing
`agent.control` frame (its websocket writer logs it just before the send);
the ends are stubllm's records of the ASGI `http.disconnect` reaching its app
and of its streaming generator being cancelled because of it, and the
adapter's stamp of its `Cancelled` leaving `on_turn` (after the response and
the turn's HTTP client were closed, so it can come after the server's). All
are `time.perf_counter()`, which is CLOCK_MONOTONIC on Linux, so the stamps
of the two processes are comparable. A stop trial then plays the room and
interrupts the replayed answer, so every trial starts from an idle room.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import control_frame_after, streaming, table

from band_trio import Agent, Turn
from band_trio.adapters import OpenAIChatAdapter
from band_trio.platform import Platform, open_platform
from peers import Peer, stubllm_peer

WAIT = 20.0


class Stamped(OpenAIChatAdapter):
    """The adapter, stamping when each turn's `Cancelled` leaves it: after the stream's
    response was closed (the turn's remote stop) and the turn's HTTP client with it, so
    stubllm may see the disconnect before this stamp."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cancelled_at: dict[str, float] = {}

    async def on_turn(self, turn: Turn) -> None:
        try:
            await super().on_turn(turn)
        except trio.Cancelled:
            self.cancelled_at.setdefault(turn.message.id, time.perf_counter())
            raise


async def signal(
    platform: Platform, peer: Peer, mode: str, room: str, req: int
) -> tuple[float, dict[str, Any]]:
    """Send `mode` to the room; the control frame's stamp and the server's cancel event."""
    agent_id = platform.info.agent_id
    assert agent_id
    mark = len(platform.log())
    platform.send_control(agent_id, mode, room_id=room, reason="benchmark")  # type: ignore[arg-type]
    cancelled = await peer.wait_for(timeout=WAIT, event="stream_cancelled", req=req)
    disconnect = await peer.wait_for(timeout=WAIT, event="disconnect", req=req)
    await platform.wait_until(lambda: control_frame_after(platform, mark) is not None)
    sent = control_frame_after(platform, mark)
    assert sent is not None
    return sent, {**cancelled, "disconnect_perf": disconnect["perf"]}


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds)

    async with (
        stubllm_peer(chunk_delay_ms=50) as peer,
        open_platform(seed=True) as platform,
        trio.open_nursery() as nursery,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id and info.user_id
        agent_id, room, user = info.agent_id, info.room_id, info.user_id
        adapter = Stamped(peer.base_url, "gpt-4o")
        agent = Agent(
            adapter, agent_id=agent_id, api_key=info.api_key, rest_url=info.rest_url,
            ws_url=info.ws_url,
        )  # fmt: skip
        await nursery.start(agent.run)

        def processed(message: str) -> Callable[[], bool]:
            return lambda: platform.delivery(message)[agent_id]["status"] == "processed"

        for trial in range(trials):
            since = peer.mark()
            message = platform.post_message(room, user, f"[slow] interrupt {trial}")
            req = await streaming(peer, since)
            sent, cancelled = await signal(platform, peer, "interrupt", room, req)
            await platform.wait_until(processed(message))
            unwound = adapter.cancelled_at[message]
            add(
                "interrupt: control frame → stubllm sees the disconnect",
                cancelled["disconnect_perf"] - sent,
            )
            add("interrupt: control frame → stubllm generator cancelled", cancelled["perf"] - sent)
            add("interrupt: control frame → adapter's turn unwound", unwound - sent)
        for trial in range(trials):
            since = peer.mark()
            message = platform.post_message(room, user, f"[slow] stop {trial}")
            req = await streaming(peer, since)
            sent, cancelled = await signal(platform, peer, "stop", room, req)
            await agent.wait_until(lambda: agent.rooms[room].running is None)
            unwound = adapter.cancelled_at.pop(message)  # stamped before the turn ended
            add(
                "stop: control frame → stubllm sees the disconnect",
                cancelled["disconnect_perf"] - sent,
            )
            add("stop: control frame → stubllm generator cancelled", cancelled["perf"] - sent)
            add("stop: control frame → adapter's turn unwound", unwound - sent)
            since = peer.mark()
            platform.send_control(agent_id, "play", room_id=room)
            req = await streaming(peer, since, chunks=1)  # the stopped message, replayed
            await signal(platform, peer, "interrupt", room, req)
            await platform.wait_until(processed(message))
        await agent.stop()
        nursery.cancel_scope.cancel()
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="also print the raw seconds as JSON")
    args = parser.parse_args()
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    results = trio.run(main, args.trials)
    print(f"{args.trials} trials per mode; stubllm 0.1.5 streaming 50 ms a chunk\n")
    print(table(results))
    if args.json:
        print(json.dumps(results, indent=1, ensure_ascii=False))
