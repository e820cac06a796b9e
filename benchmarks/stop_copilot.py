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

from band_trio import Agent
from band_trio.adapters._copilot import CopilotAdapter
from band_trio.adapters._copilot_cli import Connection
from band_trio.adapters._copilot_session import Run, Session
from band_trio.contract import StopAnswer
from band_trio.platform import Platform, open_platform
from band_trio.policy import UpstreamPolicy
from peers import Peer, stubllm_peer
from peers.copilot import copilot_config
from support import rooms_with_the_agent

WAIT = 30.0


class Stamped(CopilotAdapter):
    """The adapter, stamping when its remote stop starts and when it returns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamps: list[dict[str, Any]] = []
        self._settled = trio.Event()

    async def _stop(
        self, connection: Connection, session: Session, run: Run, upstream: UpstreamPolicy
    ) -> StopAnswer:
        stamp: dict[str, Any] = {"sent": time.perf_counter()}
        self.stamps.append(stamp)
        answer = await super()._stop(connection, session, run, upstream)
        stamp.update(settled=time.perf_counter(), answer=answer)
        self._settled.set()
        self._settled = trio.Event()
        return answer

    async def stop_settled(self, index: int) -> dict[str, Any]:
        """The stamps of the `index`-th stop, once it returned."""
        while len(self.stamps) <= index or "settled" not in self.stamps[index]:
            await self._settled.wait()
        return self.stamps[index]


async def signal(
    platform: Platform, llm: Peer, adapter: Stamped, mode: str, room: str, req: int
) -> dict[str, float]:
    """Send `mode` to the room; the control frame's stamp and what followed it, in seconds."""
    agent_id = platform.info.agent_id
    assert agent_id
    mark, stops = len(platform.log()), len(adapter.stamps)
    platform.send_control(agent_id, mode, room_id=room, reason="benchmark")  # type: ignore[arg-type]
    cancelled = await llm.wait_for(timeout=WAIT, event="stream_cancelled", req=req)
    disconnect = await llm.wait_for(timeout=WAIT, event="disconnect", req=req)
    await platform.wait_until(lambda: control_frame_after(platform, mark) is not None)
    sent = control_frame_after(platform, mark)
    assert sent is not None
    stop = await adapter.stop_settled(stops)
    outcome = stop["answer"][0] if isinstance(stop["answer"], tuple) else stop["answer"]
    assert outcome.value == "confirmed", stop
    return {
        "stubllm sees the disconnect": disconnect["perf"] - sent,
        "stubllm generator cancelled": cancelled["perf"] - sent,
        "session.abort sent": stop["sent"] - sent,
        "stop confirmed (session idle, aborted)": stop["settled"] - sent,
    }


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}

    def add(mode: str, intervals: dict[str, float]) -> None:
        for name, seconds in intervals.items():
            rows.setdefault(f"{mode}: control frame → {name}", []).append(seconds)

    async with (
        stubllm_peer(chunk_delay_ms=50) as llm,
        open_platform(seed=True) as platform,
        trio.open_nursery() as nursery,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id and info.user_id
        agent_id, user = info.agent_id, info.user_id
        room, late_room = rooms_with_the_agent(platform, 2)
        adapter = Stamped(copilot_config(llm))
        agent = Agent(
            adapter, agent_id=agent_id, api_key=info.api_key, rest_url=info.rest_url,
            ws_url=info.ws_url,
        )  # fmt: skip
        await nursery.start(agent.run)
        await adapter.cli.connection()  # the CLI's start is not what is measured

        def processed(message: str) -> Callable[[], bool]:
            return lambda: platform.delivery(message)[agent_id]["status"] == "processed"

        for trial in range(trials):
            since = llm.mark()
            message = platform.post_message(room, user, f"[slow] interrupt {trial}")
            req = await streaming(llm, since)
            add("interrupt", await signal(platform, llm, adapter, "interrupt", room, req))
            await platform.wait_until(processed(message))
        for trial in range(trials):
            since = llm.mark()
            message = platform.post_message(room, user, f"[slow] stop {trial}")
            req = await streaming(llm, since)
            add("stop", await signal(platform, llm, adapter, "stop", room, req))
            await agent.wait_until(lambda: agent.rooms[room].running is None)
            since = llm.mark()
            platform.send_control(agent_id, "play", room_id=room)
            req = await streaming(llm, since, chunks=1)  # the stopped message, replayed
            await signal(platform, llm, adapter, "interrupt", room, req)
            await platform.wait_until(processed(message))
        for trial in range(trials):
            since = llm.mark()
            message = platform.post_message(late_room, user, f"[late] first token {trial}")
            req = await streaming(llm, since, chunks=0)
            add("interrupt before the first token", await signal(
                platform, llm, adapter, "interrupt", late_room, req
            ))  # fmt: skip
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
    print(
        f"{args.trials} trials per mode; the Copilot CLI 1.0.102 (BYOK, offline) over"
        " stubllm 0.1.5 streaming 50 ms a chunk\n"
    )
    print(table(results))
    if args.json:
        print(json.dumps(results, indent=1, ensure_ascii=False))
