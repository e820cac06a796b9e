"""Interrupt → the model server's stream closed, for the asyncio framework adapters next to
the raw OpenAI chat adapter, in one run.

    .venv/bin/python benchmarks/stop_frameworks.py --trials 40 [--json]

One process (one trio run) holds the embedded platform and one band-trio agent whose
adapter hands each message to one of three adapters by its text:

* `openai`: `OpenAIChatAdapter` (httpx2 under trio: the turn's cancel closes the stream);
* `langgraph`: `LangGraphAdapter` on a checkpointed graph whose model is langchain-openai's
  `ChatOpenAI` (streaming), run on the agent's asyncio loop (`run_asyncio`);
* `openai_agents`: `OpenAIAgentsAdapter` on an Agents SDK `Agent` with its
  `OpenAIChatCompletionsModel`, run streamed on that loop.

The graph and the agent are tests/frameworks.py's, as the tests run them. The model is a
stubllm 0.1.5 server in its own process streaming the 80-chunk `[slow]` answer 50 ms a
chunk. The trials take turns (openai, langgraph, openai_agents, openai, ...), so load on
the machine falls on all three alike. Each waits until the server has sent 3 chunks of
a fresh answer, then interrupts the room; the first `--warmup` trials of each adapter
are not recorded (the first cancel of an Agents SDK run in a process takes ~0.1-0.25 s:
its one-time set-up, not a cancel's cost).

The start of every interval is the platform's stamp of the outgoing `agent.control`
frame; the ends are stubllm's records of the ASGI `http.disconnect` and of its streaming
generator being cancelled because of it, and the adapter's stamp of the turn's cancel
leaving `on_turn`. All are `time.perf_counter()` (CLOCK_MONOTONIC), comparable across the
two processes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import processed, run_cli, streaming, stubllm_signal

from band_trio import Adapter, Agent, AgentInfo, Turn
from band_trio.adapters import OpenAIChatAdapter
from band_trio.platform import open_platform
from band_trio.testing._observed import cancelled_only
from peers import stubllm_peer

ADAPTERS = ("openai", "langgraph", "openai_agents")


class Switch(Adapter):
    """Hands each turn to the adapter its message names (`[slow] NAME n`), stamping when
    the turn's cancel leaves it."""

    def __init__(self, adapters: dict[str, Adapter]) -> None:
        self.adapters = adapters
        self.cancelled_at: dict[str, float] = {}

    async def on_started(self, agent: AgentInfo) -> None:
        for adapter in self.adapters.values():
            await adapter.on_started(agent)

    async def on_turn(self, turn: Turn) -> None:
        name = turn.message.content.split()[1]
        try:
            await self.adapters[name].on_turn(turn)
        except BaseException as exc:
            if cancelled_only(exc):
                self.cancelled_at.setdefault(turn.message.id, time.perf_counter())
            raise


async def main(trials: int, warmup: int = 3) -> dict[str, list[float]]:
    from frameworks import agents_adapter, graph_adapter  # the frameworks: seconds to import

    rows: dict[str, list[float]] = {}
    async with (
        stubllm_peer(chunk_delay_ms=50) as peer,
        open_platform(seed=True) as platform,
        trio.open_nursery() as nursery,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id and info.user_id
        room, user = info.room_id, info.user_id
        adapter = Switch(
            {
                "openai": OpenAIChatAdapter(peer.base_url, "gpt-4o"),
                "langgraph": graph_adapter(peer.base_url),
                "openai_agents": agents_adapter(peer.base_url),
            }
        )
        agent = Agent(
            adapter, agent_id=info.agent_id, api_key=info.api_key, rest_url=info.rest_url,
            ws_url=info.ws_url,
        )  # fmt: skip
        await nursery.start(agent.run)
        for trial in range(warmup + trials):
            for name in ADAPTERS:
                since = peer.mark()
                message = platform.post_message(room, user, f"[slow] {name} {trial}")
                req = await streaming(peer, since)
                sent, intervals = await stubllm_signal(platform, peer, "interrupt", room, req)
                await agent.wait_until(lambda m=message: m in adapter.cancelled_at)
                unwound = adapter.cancelled_at.pop(message) - sent
                await platform.wait_until(processed(platform, message))
                if trial < warmup:
                    continue
                for interval, seconds in (intervals | {"turn unwound": unwound}).items():
                    rows.setdefault(f"{name}: interrupt → {interval}", []).append(seconds)
        await agent.stop()
        nursery.cancel_scope.cancel()
    return _grouped(rows)


def _grouped(rows: dict[str, list[float]]) -> dict[str, list[float]]:
    """The rows by interval, the three adapters of each together."""
    order = ("stubllm sees the disconnect", "stubllm generator cancelled", "turn unwound")
    return {
        key: rows[key]
        for interval in order
        for key in (f"{name}: interrupt → {interval}" for name in ADAPTERS)
        if key in rows
    }


if __name__ == "__main__":
    run_cli(
        main,
        "{trials} trials per adapter, taking turns; stubllm 0.1.5 streaming 50 ms a chunk",
        __doc__,
    )
