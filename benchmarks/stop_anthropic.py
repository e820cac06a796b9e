"""Signal → the model server's generator cancelled, for the Anthropic adapter.

    .venv/bin/python benchmarks/stop_anthropic.py --trials 20 [--json]

`benchmarks/stop_openai.py` with `AnthropicAdapter`: the official `anthropic` SDK's
stream helper, run in the turn with no bridge, against stubllm's `/v1/messages`
(Anthropic's Messages stream, src/band_trio/bench/_peers/stubllm_anthropic.py).
Run the two one after the other to set the figures side by side: the SDK's stream
against band-trio's own (`stream_request`) on the same server.

The embedded platform and a band-trio agent running `AnthropicAdapter` share
one process (one trio run); the model is a stubllm 0.1.5 server in its own
process (src/band_trio/bench/_peers/stubllm_server.py), streaming the 80-token `[slow]`
answer 50 ms a token. Each trial waits until the server has sent 3 events of
a fresh answer, then sends an interrupt (or a stop) for the room.

The start of every interval is the platform's stamp of the outgoing
`agent.control` frame (its websocket writer logs it just before the send);
the ends are stubllm's records of the ASGI `http.disconnect` reaching its app
and of its streaming generator being cancelled because of it, and the
adapter's stamp of its `Cancelled` leaving `on_turn` (after the response and
the turn's SDK client were closed, so it can come after the server's). All
are `time.perf_counter()`, which is CLOCK_MONOTONIC on Linux, so the stamps
of the two processes are comparable. A stop trial then plays the room and
interrupts the replayed answer, so every trial starts from an idle room.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import run_cli, slow_trials, stubllm_signal

from band_trio import Agent, Turn
from band_trio.adapters import AnthropicAdapter
from band_trio.platform import open_platform
from peers import stubllm_peer


class Stamped(AnthropicAdapter):
    """The adapter, stamping when each turn's `Cancelled` leaves it: after the stream's
    response was closed (the turn's remote stop) and the turn's SDK client with it, so
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


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    async with (
        stubllm_peer(chunk_delay_ms=50) as peer,
        open_platform(seed=True) as platform,
        trio.open_nursery() as nursery,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id
        room = info.room_id
        adapter = Stamped(peer.url, "claude-sonnet-4-6", api_key="sk-bench")
        agent = Agent(
            adapter, agent_id=info.agent_id, api_key=info.api_key, rest_url=info.rest_url,
            ws_url=info.ws_url,
        )  # fmt: skip
        await nursery.start(agent.run)

        async def measure(mode: str, message: str, req: int) -> dict[str, float]:
            sent, intervals = await stubllm_signal(platform, peer, mode, room, req)
            # the stamp is taken before the turn ends, which wakes the agent's waiters;
            # popped, as a stopped message's replay is stamped again
            await agent.wait_until(lambda: message in adapter.cancelled_at)
            return intervals | {"adapter's turn unwound": adapter.cancelled_at.pop(message) - sent}

        await slow_trials(platform, peer, agent, room, trials, measure, rows)
        await agent.stop()
        nursery.cancel_scope.cancel()
    return rows


if __name__ == "__main__":
    header = "{trials} trials per mode; anthropic SDK; stubllm 0.1.5 streaming 50 ms a token"
    run_cli(main, header, __doc__)
