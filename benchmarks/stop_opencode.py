"""Signal → OpenCode aborted (its model stream cancelled, its abort answered), for the
OpenCode adapter.

    .venv/bin/python benchmarks/stop_opencode.py --trials 20 [--json]

The embedded platform and a band-trio agent running `OpenCodeAdapter` share
one process (one trio run); `opencode serve` 1.18.33 (tests/peers/opencode.py,
installed by `python3 dev.py test`) runs in its own process with a stubllm
0.1.5 server (src/band_trio/bench/_peers/stubllm_server.py) as its model, streaming the
80-chunk `[slow]` answer 50 ms a chunk. Each trial waits until stubllm has
sent 3 chunks of a fresh answer, then sends an interrupt (or a stop) for the
room. All turns run in the room's one OpenCode session, so later prompts
carry the earlier, aborted ones.

The start of every interval is the platform's stamp of the outgoing
`agent.control` frame (its websocket writer logs it just before the send).
The ends: stubllm's records of the ASGI `http.disconnect` reaching its app and
of its streaming generator being cancelled (OpenCode closed its upstream
request); the adapter's stamps of sending `POST /session/{id}/abort`, of its
`200 true` arriving, and of the stop returning `confirmed` (the session's
`session.error` / idle read from the event stream). All are
`time.perf_counter()`, which is CLOCK_MONOTONIC on Linux, so the stamps of the
three processes are comparable. A stop trial then plays the room and
interrupts the replayed answer, so every trial starts from an idle room.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import StopStamps, run_cli, slow_trials, stubllm_signal

from band_trio import Agent
from band_trio.adapters._opencode import OpenCodeAdapter
from band_trio.adapters._opencode_events import Events
from band_trio.contract import StopAnswer
from band_trio.platform import open_platform
from band_trio.policy import UpstreamPolicy
from peers import stubllm_peer
from peers.opencode import opencode_peer


class Stamped(StopStamps, OpenCodeAdapter):
    """The adapter, stamping its abort request, its answer and the stop's outcome."""

    async def _post_abort(
        self, client: httpx2.AsyncClient, session: str, upstream: UpstreamPolicy
    ) -> bytes:
        sent = time.perf_counter()
        answer = await super()._post_abort(client, session, upstream)
        self.stamps.append({"sent": sent, "answered": time.perf_counter()})
        return answer

    async def _stop(
        self, client: httpx2.AsyncClient, events: Events, room: Any, upstream: UpstreamPolicy
    ) -> StopAnswer:
        answer = await super()._stop(client, events, room, upstream)
        self.settled(answer)
        return answer


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    async with (
        stubllm_peer(chunk_delay_ms=50) as llm,
        opencode_peer(llm.base_url) as peer,
        open_platform(seed=True) as platform,
        trio.open_nursery() as nursery,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id
        room = info.room_id
        adapter = Stamped(peer.url, provider_id="stub", model_id="gpt-4o")
        agent = Agent(
            adapter, agent_id=info.agent_id, api_key=info.api_key, rest_url=info.rest_url,
            ws_url=info.ws_url,
        )  # fmt: skip
        await nursery.start(agent.run)

        async def measure(mode: str, message: str, req: int) -> dict[str, float]:
            stops = len(adapter.stamps)
            sent, intervals = await stubllm_signal(platform, llm, mode, room, req)
            stop = await adapter.stop_settled(stops)
            return intervals | {
                "abort sent": stop["sent"] - sent,
                "abort answered 200 true": stop["answered"] - sent,
                "stop confirmed (session.error/idle read)": stop["settled"] - sent,
            }

        await slow_trials(platform, llm, agent, room, trials, measure, rows)
        await agent.stop()
        nursery.cancel_scope.cancel()
    return rows


if __name__ == "__main__":
    run_cli(
        main, "{trials} trials per mode; OpenCode 1.18.33 over stubllm 0.1.5 streaming"
        " 50 ms a chunk", __doc__,
    )  # fmt: skip
