"""Signal → an ACP agent cancelled (`session/cancel` sent, its model stream closed, the prompt
answered `cancelled`), for the ACP adapter against OpenCode (`opencode acp`).

    .venv/bin/python benchmarks/stop_acp.py --trials 20 [--json]

The embedded platform and a band-trio agent running `AcpAdapter` share one process
(one trio run); the adapter runs `opencode acp --pure` 1.18.33 (tests/peers/acp_agents.py:
OpenCode's isolated layout, installed by `python3 dev.py test`) with a stubllm 0.1.5
server (src/band_trio/bench/_peers/stubllm_server.py) as its model, streaming the
80-chunk `[slow]` answer 50 ms a chunk. The room's session is started first with a
quick prompt (OpenCode names a new session with a model call of its own). Each trial
waits until stubllm has sent 3 chunks of a fresh answer, then sends an interrupt (or
a stop) for the room; a stop trial then plays the room and interrupts the replayed
answer, so every trial starts from an idle room. All turns run in the room's one ACP
session, so later prompts carry the earlier, cancelled ones.

The start of every interval is the platform's stamp of the outgoing `agent.control`
frame (its websocket writer logs it just before the send). The ends: stubllm's
records of the ASGI `http.disconnect` reaching its app and of its streaming
generator being cancelled (OpenCode closed its upstream request); the adapter's
stamps of its remote stop starting (`session/cancel` is written at once) and
returning `confirmed` (the prompt answered `stopReason: "cancelled"`). All are
`time.perf_counter()`, CLOCK_MONOTONIC on Linux, so the stamps of the three
processes are comparable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import StopStamps, processed, run_cli, slow_trials, stubllm_signal

from band_trio import Agent
from band_trio.adapters._acp import AcpAdapter
from band_trio.adapters._acp_agent import AcpConnection
from band_trio.adapters._acp_session import Session
from band_trio.adapters._jsonrpc import Call
from band_trio.contract import StopAnswer
from band_trio.platform import open_platform
from band_trio.policy import UpstreamPolicy
from peers import stubllm_peer
from peers.acp_agents import opencode_acp_config


class Stamped(StopStamps, AcpAdapter):
    """The adapter, stamping when its remote stop starts and when it returns."""

    async def _stop(
        self, connection: AcpConnection, session: Session, call: Call, upstream: UpstreamPolicy
    ) -> StopAnswer:
        self.stamps.append({"sent": time.perf_counter()})
        answer = await super()._stop(connection, session, call, upstream)
        self.settled(answer)
        return answer


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}
    async with (
        stubllm_peer(chunk_delay_ms=50) as llm,
        open_platform(seed=True) as platform,
        trio.open_nursery() as nursery,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.user_id and info.room_id
        with opencode_acp_config(llm) as config:
            adapter = Stamped(config)
            agent = Agent(
                adapter, agent_id=info.agent_id, api_key=info.api_key, rest_url=info.rest_url,
                ws_url=info.ws_url,
            )  # fmt: skip
            await nursery.start(agent.run)
            room = info.room_id
            warm = platform.post_message(room, info.user_id, "[quick] warm up")
            await platform.wait_until(processed(platform, warm))  # the session, and its title

            async def measure(mode: str, message: str, req: int) -> dict[str, float]:
                stops = len(adapter.stamps)
                sent, intervals = await stubllm_signal(platform, llm, mode, room, req)
                stop = await adapter.stop_settled(stops)
                return intervals | {
                    "session/cancel sent": stop["sent"] - sent,
                    "stop confirmed (prompt answered cancelled)": stop["settled"] - sent,
                }

            await slow_trials(platform, llm, agent, room, trials, measure, rows)
            await agent.stop()
        nursery.cancel_scope.cancel()
    return rows


if __name__ == "__main__":
    run_cli(
        main, "{trials} trials per mode; opencode acp 1.18.33 over stubllm 0.1.5 streaming"
        " 50 ms a chunk", __doc__,
    )  # fmt: skip
