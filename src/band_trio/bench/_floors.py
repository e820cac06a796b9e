"""The floors, measured in the same run as the runtimes: what no runtime can beat.

Each floor is what the platform and the libraries cost with nothing of an
agent runtime in between (`_floor_client`, a process of its own):

| floor     | what it is |
|-----------|------------|
| `push`    | the platform's stamp of an `agent.control` frame → a raw trio-websocket |
|           | client has it, sent after the same idle pause as every signal trial |
| `push_hot`| the same, sent the moment the previous one arrived (nothing idle) |
| `rest_in` | an httpx2 client about to send `GET /next` → the platform's entry stamp |
| `rest_rtt`| the same request's full round trip, as the client sees it |
| `tcp_rtt` | 64 bytes there and back over blocking loopback sockets |

A metric is judged against the composition of floors on its path, e.g.
interrupt → `processed` arrives against `push + rest_in`; the runtime's own
part is what is left (`_results.Row.own_p50_ms`).

The two push floors differ by the machine, not the code: after 50 ms with
nothing to do, both vCPUs of this VM halt, and waking the reading process
costs about 0.4 ms, in a bare trio-websocket server → client pair as much as
through the platform (docs/benchmarks.md). Every trial signals a turn that
has been parked for `Options.settle`, so it is judged against the paced floor.
"""

from __future__ import annotations

import socket
import subprocess
import sys

import trio

from ..platform import Platform
from ._results import Series
from ._subject import Identity, environment, start
from ._watch import LogWatch

__all__ = ["COMPOSED", "measure_floors"]

COMPOSED = {
    "push": ("push",),
    "push+rest_in": ("push", "rest_in"),
    "push+2rtt": ("push", "rest_rtt", "rest_rtt"),
}
"""Floor names used by metrics → the measured floors they add up."""

DEADLINE = 5.0


def _echo(listener: socket.socket) -> None:
    """A blocking echo server thread for the TCP floor: one connection, then done."""
    conn, _ = listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(4096):
            conn.sendall(data)


async def measure_floors(
    platform: Platform, watch: LogWatch, identity: Identity, room: str, n: int, pacing: float
) -> list[Series]:
    """Run the floor client once: `n` samples of each floor."""
    names = ("push", "push_hot", "rest_in", "rest_rtt")
    series = {name: Series("floor", "floor", 1, name) for name in names}
    tcp = Series("floor", "floor", 1, "tcp_rtt")
    info = platform.info
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    argv = [sys.executable, "-m", "band_trio.bench._floor_client", info.ws_url, info.rest_url]
    argv += [identity.agent_id, identity.api_key, room, str(port), str(n)]
    env = environment(identity, info.rest_url, info.ws_url)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, _echo, listener)
        client = await start(nursery, identity, argv, env, stdin=subprocess.PIPE)
        try:
            with trio.fail_after(DEADLINE + n * 0.05):
                await client.wait("ready", "push")
            entries = watch.stamps(("next", identity.agent_id, room))
            for i, entered in enumerate(entries[-n:]):
                sent = client.seen[("rest_sent", str(i))][0]
                back = client.seen[("rest_back", str(i))][0]
                series["rest_in"].add(entered - sent)
                series["rest_rtt"].add(back - sent)
            for key in client.seen:
                if key[0] == "tcp":
                    tcp.add(client.values[key[1]] / 1e9)
            for _ in range(n):
                await trio.sleep(pacing)  # idle before the push, as before every signal
                for name in ("push", "push_hot"):  # then one more at once, all awake
                    position = watch.position
                    correlation = platform.send_control(identity.agent_id, "interrupt")
                    with trio.move_on_after(DEADLINE):
                        stamped = await watch.wait(("control", identity.agent_id), position)
                        received = await client.wait("push", correlation)
                        series[name].add(received - stamped)
                        continue
                    series[name].add(None, "the raw client never got the frame")
        finally:
            listener.close()
            assert client.process.stdin is not None
            await client.process.stdin.aclose()
            with trio.move_on_after(DEADLINE):
                await client.process.wait()
            if client.process.returncode is None:
                client.process.kill()
    return [*series.values(), tcp]
