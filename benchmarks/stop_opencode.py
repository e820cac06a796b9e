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

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stopwatch import control_frame_after, streaming, table

from band_trio import Agent
from band_trio.adapters._opencode import OpenCodeAdapter
from band_trio.adapters._opencode_events import Events
from band_trio.contract import StopAnswer
from band_trio.platform import Platform, open_platform
from peers import Peer, stubllm_peer
from peers.opencode import opencode_peer

WAIT = 30.0


class Stamped(OpenCodeAdapter):
    """The adapter, stamping its abort request, its answer and the stop's outcome."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamps: list[dict[str, Any]] = []
        self._settled = trio.Event()

    async def _post_abort(self, client: httpx2.AsyncClient, session: str) -> httpx2.Response:
        sent = time.perf_counter()
        response = await super()._post_abort(client, session)
        self.stamps.append({"sent": sent, "answered": time.perf_counter()})
        return response

    async def _stop(self, client: httpx2.AsyncClient, events: Events, room: Any) -> StopAnswer:
        answer = await super()._stop(client, events, room)
        self.stamps[-1].update(settled=time.perf_counter(), answer=answer)
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
        "abort sent": stop["sent"] - sent,
        "abort answered 200 true": stop["answered"] - sent,
        "stop confirmed (session.error/idle read)": stop["settled"] - sent,
    }


async def main(trials: int) -> dict[str, list[float]]:
    rows: dict[str, list[float]] = {}

    def add(mode: str, intervals: dict[str, float]) -> None:
        for name, seconds in intervals.items():
            rows.setdefault(f"{mode}: control frame → {name}", []).append(seconds)

    async with (
        stubllm_peer(chunk_delay_ms=50) as llm,
        opencode_peer(llm.base_url) as peer,
        open_platform(seed=True) as platform,
        trio.open_nursery() as nursery,
    ):
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id and info.user_id
        agent_id, room, user = info.agent_id, info.room_id, info.user_id
        adapter = Stamped(peer.url, provider_id="stub", model_id="gpt-4o")
        agent = Agent(
            adapter, agent_id=agent_id, api_key=info.api_key, rest_url=info.rest_url,
            ws_url=info.ws_url,
        )  # fmt: skip
        await nursery.start(agent.run)

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
        f"{args.trials} trials per mode; OpenCode 1.18.33 over stubllm 0.1.5 streaming"
        " 50 ms a chunk\n"
    )
    print(table(results))
    if args.json:
        print(json.dumps(results, indent=1, ensure_ascii=False))
