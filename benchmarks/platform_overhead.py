"""How much time the embedded platform itself adds to a request.

    .venv/bin/python benchmarks/platform_overhead.py --requests 2000

Runs the platform in this process and a keep-alive httpx2 client against it
over loopback, sequentially, and reports round-trip medians and percentiles
for the lifecycle calls the runtime makes most (`/next` answering 204, a claim,
a processed mark, an activity report) and for a websocket push (post → frame
received by a raw client). Every figure the latency benchmark reports includes
this overhead.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx2
import trio
import trio_websocket

from band_trio.platform import open_platform


def summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000

    return (
        f"{name:28} n={len(samples):5}  median {statistics.median(samples) * 1000:6.3f} ms"
        f"  p10 {pct(0.10):6.3f}  p90 {pct(0.90):6.3f}  p99 {pct(0.99):6.3f}"
    )


async def main(requests: int) -> None:
    async with open_platform(seed=True) as platform:
        info = platform.info
        assert info.agent_id and info.api_key and info.room_id and info.user_id
        base = f"{info.rest_url}/api/v1/agent/chats/{info.room_id}"
        headers = {"X-API-Key": info.api_key, "content-type": "application/json"}  # as the link
        results: dict[str, list[float]] = {
            k: []
            for k in ("next (204)", "processing", "processed", "activity", "push (post -> frame)")
        }
        async with httpx2.AsyncClient(headers=headers) as client:
            for _ in range(50):  # warm up
                await client.get(f"{base}/messages/next")
            for _ in range(requests):
                t0 = time.perf_counter()
                await client.get(f"{base}/messages/next")
                results["next (204)"].append(time.perf_counter() - t0)
            for _ in range(requests // 4):
                message = platform.post_message(info.room_id, info.user_id, "x")
                t0 = time.perf_counter()
                await client.post(f"{base}/messages/{message}/processing")
                results["processing"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await client.post(f"{base}/messages/{message}/processed")
                results["processed"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await client.post(f"{base}/activity", content=b'{"working":true}')
                results["activity"].append(time.perf_counter() - t0)
        ws_url = f"{info.ws_url}?vsn=2.0.0&agent_id={info.agent_id}"
        async with trio_websocket.open_websocket_url(
            ws_url,
            extra_headers=[(b"x-api-key", info.api_key.encode())],
            connect_timeout=5,
            disconnect_timeout=5,
        ) as ws:
            await ws.send_message(f'["1","1","chat_room:{info.room_id}","phx_join",{{}}]')
            await ws.get_message()
            for _ in range(requests // 4):
                t0 = time.perf_counter()
                platform.post_message(info.room_id, info.user_id, "pushed")
                await ws.get_message()
                results["push (post -> frame)"].append(time.perf_counter() - t0)
        for name, samples in results.items():
            print(summary(name, samples))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    trio.run(main, parser.parse_args().requests)
