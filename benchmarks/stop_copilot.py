"""Signal → the Copilot CLI aborted (its model stream closed, the stop confirmed), for the
Copilot adapter.

    .venv/bin/python benchmarks/stop_copilot.py --trials 20 [--json]

The embedded platform and a band-trio agent running `CopilotAdapter` share one
process (one trio run); the adapter runs the real GitHub Copilot CLI 1.0.102
(tests/peers/copilot.py, installed by `python3 dev.py test`) offline in BYOK mode,
with a stubllm 0.1.5 server (src/band_trio/bench/_peers/stubllm_server.py) as its
model, streaming the 80-chunk `[slow]` answer 50 ms a chunk. Each trial waits until
stubllm has sent 3 chunks of a fresh answer, then sends an interrupt (or a stop) for
the room; a stop trial then plays the room and interrupts the replayed answer, so
every trial starts from an idle room. The "before the first token" trials, in a room
of their own, send `[late]` (stubllm answers only after 30 s) and interrupt once
stubllm's stream has started. All turns of a room run in its one Copilot session.

The start of every interval is the platform's stamp of the outgoing `agent.control`
frame (its websocket writer logs it just before the send). The ends: stubllm's
records of the ASGI `http.disconnect` reaching its app and of its streaming generator
being cancelled (the CLI closed its upstream request); the adapter's stamps of its
remote stop starting (`session.abort` is written at once) and returning `confirmed`
(the session went idle, aborted). All are `time.perf_counter()`, CLOCK_MONOTONIC on
Linux, so the stamps of the three processes are comparable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import StopStamps, processed, run_cli, slow_trials, streaming, stubllm_signal

from band_trio import Agent
from band_trio.adapters._copilot import CopilotAdapter
from band_trio.adapters._copilot_cli import Connection
from band_trio.adapters._copilot_session import Run, Session
from band_trio.contract import StopAnswer
from band_trio.platform import open_platform
from band_trio.policy import UpstreamPolicy
from peers import stubllm_peer
from peers.copilot import copilot_config
from support import rooms_with_the_agent


class Stamped(StopStamps, CopilotAdapter):
    """The adapter, stamping when its remote stop starts and when it returns."""

    async def _stop(
        self, connection: Connection, session: Session, run: Run, upstream: UpstreamPolicy
    ) -> StopAnswer:
        self.stamps.append({"sent": time.perf_counter()})
        answer = await super()._stop(connection, session, run, upstream)
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
        assert info.agent_id and info.api_key and info.user_id
        room, late_room = rooms_with_the_agent(platform, 2)
        adapter = Stamped(copilot_config(llm))
        agent = Agent(
            adapter, agent_id=info.agent_id, api_key=info.api_key, rest_url=info.rest_url,
            ws_url=info.ws_url,
        )  # fmt: skip
        await nursery.start(agent.run)
        await adapter.cli.connection()  # the CLI's start is not what is measured

        async def measure(mode: str, room: str, req: int) -> dict[str, float]:
            stops = len(adapter.stamps)
            sent, intervals = await stubllm_signal(platform, llm, mode, room, req)
            stop = await adapter.stop_settled(stops)
            return intervals | {
                "session.abort sent": stop["sent"] - sent,
                "stop confirmed (session idle, aborted)": stop["settled"] - sent,
            }

        await slow_trials(
            platform, llm, agent, room, trials, lambda mode, _, req: measure(mode, room, req),
            rows,
        )  # fmt: skip
        for trial in range(trials):
            since = llm.mark()
            message = platform.post_message(late_room, info.user_id, f"[late] first token {trial}")
            req = await streaming(llm, since, chunks=0)
            for name, seconds in (await measure("interrupt", late_room, req)).items():
                label = f"interrupt before the first token: control frame → {name}"
                rows.setdefault(label, []).append(seconds)
            await platform.wait_until(processed(platform, message))
        await agent.stop()
        nursery.cancel_scope.cancel()
    return rows


if __name__ == "__main__":
    run_cli(
        main, "{trials} trials per mode; the Copilot CLI 1.0.102 (BYOK, offline) over"
        " stubllm 0.1.5 streaming 50 ms a chunk", __doc__,
    )  # fmt: skip
