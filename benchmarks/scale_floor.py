"""The floor of the scale rows: the embedded platform and the client libraries alone.

    .venv/bin/python benchmarks/scale_floor.py [--rooms 10000] [--marks 1000] [--trials 3]

What no runtime can beat on this machine, measured the way `band-trio bench`
measures band-trio (docs/benchmarks.md § the scale rows): the embedded
platform in this process, and a minimal client in a process of its own, with
the same libraries as band-trio (trio-websocket, and band-trio's own lean
HTTP/1.1 pool, `band_trio.link._http_pool.HttpPool` on h11, with 32 connections) and
no runtime in between (no lanes, no retries, no decoding):

- `joins`: one socket; every room's `chat_room` join is sent at once, and each
  room's `room_participants` join the moment its `chat_room` reply comes (the
  protocol's order); until the last reply;
- `synced`: then one `GET /messages/next` per room, 32 at a time (the pool),
  until the last answer; both from the socket being open;
- `marks`: `--marks` rooms with one claimed message each; every `/processed`
  sent at once over the 32 connections, until the last answer (the end of a
  mass abort's wave), and the median answer;
- `close`: the socket closed with every topic joined (one close frame).

It prints one JSON line per trial and a summary.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.parse

import trio
import trio_websocket

from band_trio.link._http_pool import HttpPool

CONNECTIONS = 32
LIMIT = 1 << 20
DEADLINE = 60.0
"""Per request: 1,000 marks wait for the pool longer than a usual request deadline."""


async def _client(
    ws_url: str,
    rest_url: str,
    agent_id: str,
    key: str,
    rooms: list[str],
    marks: list[tuple[str, str]],
) -> dict[str, float]:
    out: dict[str, float] = {}
    url = f"{ws_url}?vsn=2.0.0&agent_id={agent_id}"
    headers = [(b"x-api-key", key.encode())]
    base = urllib.parse.urlsplit(rest_url.rstrip("/")).path + "/api/v1/agent/"
    pool = HttpPool(
        rest_url,
        {"x-api-key": key, "accept": "application/json"},
        connections=CONNECTIONS,
        context=None,
        close_grace=1.0,
    )

    async def call(method: str, path: str) -> int:
        with trio.fail_after(DEADLINE):
            answer = await pool.request(method, base + path, None, LIMIT)
        return answer.status_code

    async with pool:
        async with trio_websocket.open_websocket_url(
            url, extra_headers=headers, message_queue_size=0
        ) as ws:
            t0 = time.perf_counter()
            ref = 0
            pending: dict[str, tuple[str, str]] = {}

            async def send_join(topic: str, room: str) -> None:
                nonlocal ref
                ref += 1
                pending[str(ref)] = (topic, room)
                await ws.send_message(json.dumps([str(ref), str(ref), topic, "phx_join", {}]))

            for topic in (f"agent_control:{agent_id}", f"agent_rooms:{agent_id}"):
                await send_join(topic, "")
            for room in rooms:
                await send_join(f"chat_room:{room}", room)
            left = 2 + 2 * len(rooms)
            while left:
                frame = json.loads(await ws.get_message())
                if frame[3] != "phx_reply":
                    continue
                topic, room = pending.pop(frame[1])
                assert frame[4]["status"] == "ok", frame
                left -= 1
                if topic.startswith("chat_room:"):
                    await send_join(f"room_participants:{room}", room)
            out["joins"] = time.perf_counter() - t0

            queue = list(rooms)

            async def worker() -> None:
                while queue:
                    room = queue.pop()
                    status = await call("GET", f"chats/{room}/messages/next")
                    assert status in (200, 204), status

            async with trio.open_nursery() as nursery:
                for _ in range(CONNECTIONS):
                    nursery.start_soon(worker)
            out["synced"] = time.perf_counter() - t0

            # claims (untimed), then every mark at once
            claims = list(marks)

            async def claimer() -> None:
                while claims:
                    room, message = claims.pop()
                    status = await call("POST", f"chats/{room}/messages/{message}/processing")
                    assert status == 200, status

            async with trio.open_nursery() as nursery:
                for _ in range(CONNECTIONS):
                    nursery.start_soon(claimer)
            answered: list[float] = []
            t1 = time.perf_counter()

            async def mark(room: str, message: str) -> None:
                status = await call("POST", f"chats/{room}/messages/{message}/processed")
                answered.append(time.perf_counter() - t1)
                assert status == 200, status

            if marks:
                async with trio.open_nursery() as nursery:
                    for room, message in marks:
                        nursery.start_soon(mark, room, message)
                out["marks_last"] = max(answered)
                out["marks_median"] = statistics.median(answered)
                out["marks_p99"] = sorted(answered)[int(0.99 * (len(answered) - 1))]
            t2 = time.perf_counter()
        out["close"] = time.perf_counter() - t2
    return out


def client_main(argv: list[str]) -> None:
    spec = json.loads(sys.stdin.read())
    result = trio.run(
        _client,
        spec["ws"],
        spec["rest"],
        spec["agent"],
        spec["key"],
        spec["rooms"],
        [tuple(m) for m in spec["marks"]],
    )
    print(json.dumps(result), flush=True)


async def _driver(args: argparse.Namespace) -> None:
    from band_trio.platform import open_platform
    from band_trio.policy import PlatformPolicy

    results: list[dict[str, float]] = []
    policy = PlatformPolicy(log_entries=500_000)
    async with open_platform(seed=True, policy=policy) as platform:
        user = platform.info.user_id
        for trial in range(args.trials):
            agent = platform.create_agent(name=f"floor {trial}", handle=f"floor-{trial}")
            rooms = [
                platform.create_room(f"f{trial} {i}", [agent.id, user]).id
                for i in range(args.rooms)
            ]
            marks = []
            for room in rooms[: args.marks]:
                marks.append((room, platform.post_message(room, user, "hi")))
            spec = {
                "ws": platform.info.ws_url,
                "rest": platform.info.rest_url,
                "agent": agent.id,
                "key": agent.api_key,
                "rooms": rooms,
                "marks": marks,
            }
            load = os.getloadavg()
            result = await trio.run_process(
                [sys.executable, __file__, "--client"],
                stdin=json.dumps(spec).encode(),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            if result.returncode:
                print(result.stderr.decode()[-3000:], file=sys.stderr)
                raise SystemExit(1)
            figures = json.loads(result.stdout.decode().strip().splitlines()[-1])
            figures["load1"] = load[0]
            results.append(figures)
            print(json.dumps(figures), flush=True)
    for key in results[0]:
        values = sorted(r[key] for r in results)
        scale, unit = (1, "") if key == "load1" else (1000, " ms")
        median = statistics.median(values) * scale
        print(f"{key}: median {median:.1f}{unit} ({values[0]:.3f}-{values[-1]:.3f} s)")


def main() -> None:
    if "--client" in sys.argv:
        client_main(sys.argv)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rooms", type=int, default=10_000)
    parser.add_argument("--marks", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=3)
    trio.run(_driver, parser.parse_args())


if __name__ == "__main__":
    main()
