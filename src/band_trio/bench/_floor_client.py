"""The floor: what the libraries and the platform cost with no runtime in between.

    python -m band_trio.bench._floor_client WS_URL REST_URL AGENT_ID KEY ROOM TCP_PORT N

Run in its own process by the driver (`_floors`), like an agent under test:

1. `tcp`: N round trips of 64 bytes over blocking loopback sockets to the
   driver's echo thread (`n` = the round trip in nanoseconds);
2. `rest_sent` / `rest_back`: N sequential `GET .../messages/next` (an empty
   room: 204) from one keep-alive httpx2 client; the driver pairs them with
   the platform's entry stamps;
3. a raw trio-websocket client joined to `agent_control:AGENT_ID`, which
   stamps every `agent.control` frame it receives (`push`, by correlation id),
   until the driver closes its stdin.
"""

from __future__ import annotations

import json
import socket
import sys
import time

import httpx2
import trio
import trio_websocket

from ..tls import shared_ssl_context
from ._protocol import observe

WARM_UP = 20


def _tcp(port: int, n: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        payload = b"x" * 64
        for i in range(WARM_UP + n):
            start = time.perf_counter_ns()
            sock.sendall(payload)
            got = 0
            while got < len(payload):
                got += len(sock.recv(4096))
            took = time.perf_counter_ns() - start
            if i >= WARM_UP:
                observe("tcp", str(i), took)


async def _rest(rest_url: str, key: str, room: str, n: int) -> None:
    url = f"{rest_url}/api/v1/agent/chats/{room}/messages/next"
    async with httpx2.AsyncClient(
        headers={"x-api-key": key}, verify=shared_ssl_context()
    ) as client:
        for _ in range(WARM_UP):
            (await client.get(url)).raise_for_status()
        for i in range(n):
            observe("rest_sent", str(i))
            response = await client.get(url)
            observe("rest_back", str(i))
            response.raise_for_status()


async def _push(ws_url: str, agent_id: str, key: str) -> None:
    url = f"{ws_url}?vsn=2.0.0&agent_id={agent_id}"
    headers = [(b"x-api-key", key.encode())]
    async with trio_websocket.open_websocket_url(url, extra_headers=headers) as ws:
        topic = f"agent_control:{agent_id}"
        await ws.send_message(json.dumps(["1", "1", topic, "phx_join", {}]))
        while True:
            frame = json.loads(await ws.get_message())
            if frame[2] == topic and frame[3] == "phx_reply":
                break
        observe("ready", "push")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_until_stdin_closes, nursery.cancel_scope)
            while True:
                text = await ws.get_message()
                t = time.perf_counter()
                frame = json.loads(text)
                if frame[3] == "agent.control":
                    _stamped("push", frame[4]["correlation_id"], t)


def _stamped(kind: str, message_id: str, t: float) -> None:
    sys.stdout.write(json.dumps({"e": kind, "m": message_id, "t": t}) + "\n")
    sys.stdout.flush()


async def _until_stdin_closes(scope: trio.CancelScope) -> None:
    stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
    while await stdin.receive_some():
        pass
    scope.cancel()


async def _main(argv: list[str]) -> None:
    ws_url, rest_url, agent_id, key, room, port, n = argv
    await trio.to_thread.run_sync(_tcp, int(port), int(n))
    await _rest(rest_url, key, room, int(n))
    await _push(ws_url, agent_id, key)


if __name__ == "__main__":
    trio.run(_main, sys.argv[1:])
