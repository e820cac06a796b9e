"""httpx2 against a lean HTTP/1.1 client on trio streams (h11), in the same run.

    .venv/bin/python benchmarks/rest_client.py [--n 300] [--pace 0.05] [--json FILE]

The embedded platform runs in this process; a client process (this script with
`--client`) sends `POST …/activity {"working": false}` — the request a stop's
`working: false` is — from five clients in turn, request after request, each
after `--pace` seconds idle (what a signal meets: an agent idle on its model),
the order rotated every round so that drift hits all alike:

- `httpx2`: an `httpx2.AsyncClient` used the way `band_trio.link.RestClient`
  uses it (base URL, default headers, `stream()`, the body read in chunks);
- `httpx2-transport`: the same client's transport called directly with a
  request built beforehand (what is left of httpx2 without its client layer);
- `httpx2-request`: the transport called directly with a request built per call
  from a full URL string and the client's headers (no client layer);
- `h11`: a lean client, one `h11.Connection` on one `trio.SocketStream`,
  headers and body written in one `send_all`;
- `h11-prebuilt`: the same with the request's bytes formatted by hand (no
  `h11.Request` built), h11 only reading the answer.

For each: call → the platform's entry stamp (`rest_in`), the full round trip
as the client sees it, and call → the client's first socket write (the client
side of `rest_in`), p50 and p99 in ms. Load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import h11
import httpx2
import trio

BODY = b'{"working":false}'
NAMES = ("httpx2", "httpx2-transport", "httpx2-request", "h11", "h11-prebuilt")
_FIRST_WRITE: list[float] = []


def _stamp_first_write() -> None:
    original = trio.SocketStream.send_all

    async def send_all(self: trio.SocketStream, data: Any) -> None:
        _FIRST_WRITE.append(time.perf_counter())
        await original(self, data)

    trio.SocketStream.send_all = send_all  # type: ignore[method-assign]


class Lean:
    """One keep-alive connection; headers and body in one write."""

    def __init__(self, host: str, port: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.host, self.port, self.headers = host, port, headers
        self.authority = f"{host}:{port}".encode()
        self.stream: trio.SocketStream | None = None
        self.conn = h11.Connection(h11.CLIENT)

    async def _open(self) -> trio.SocketStream:
        if self.stream is None:
            self.stream = await trio.open_tcp_stream(self.host, self.port)
        return self.stream

    async def request(self, target: bytes, body: bytes, prebuilt: bool) -> int:
        stream = await self._open()
        conn = self.conn
        if prebuilt:
            data = b"".join(
                [b"POST ", target, b" HTTP/1.1\r\nhost: ", self.authority, b"\r\n"]
                + [k + b": " + v + b"\r\n" for k, v in self.headers]
                + [b"content-length: %d\r\n\r\n" % len(body), body]
            )
            # h11 must know a request went out to parse its answer
            conn.send(h11.Request(method=b"POST", target=target, headers=self._all(body)))
            conn.send(h11.Data(data=body))
            conn.send(h11.EndOfMessage())
        else:
            data = conn.send(h11.Request(method=b"POST", target=target, headers=self._all(body)))
            data += conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        await stream.send_all(data)
        status = 0
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.EndOfMessage):
                conn.start_next_cycle()
                return status

    def _all(self, body: bytes) -> list[tuple[bytes, bytes]]:
        return [(b"host", self.authority), *self.headers, (b"content-length", b"%d" % len(body))]


async def _client(rest_url: str, key: str, room: str, n: int, pace: float) -> None:
    _stamp_first_write()
    base = rest_url.rstrip("/") + "/api/v1/agent/"
    path = f"chats/{room}/activity"
    headers = {"X-API-Key": key, "content-type": "application/json"}
    host_port = rest_url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.rsplit(":", 1)
    target = f"/api/v1/agent/{path}".encode()
    lean = Lean(
        host, int(port), [(b"x-api-key", key.encode()), (b"content-type", b"application/json")]
    )
    lean_pre = Lean(host, int(port), lean.headers)
    async with httpx2.AsyncClient(base_url=base, headers=headers) as client:
        transport = client._transport
        prepared = client.build_request("POST", path, content=BODY)

        async def via_httpx2() -> int:
            async with client.stream("POST", path, content=BODY) as response:
                async for _ in response.aiter_bytes():
                    pass
            return response.status_code

        async def via_transport() -> int:
            response = await transport.handle_async_request(prepared)
            await response.aread()
            await response.aclose()
            return response.status_code

        full_url = base + path
        client_headers = client.headers
        extensions = {"timeout": client.timeout.as_dict()}

        async def via_request() -> int:  # the client layer skipped, the request built here
            request = httpx2.Request(
                "POST", full_url, headers=client_headers, content=BODY, extensions=extensions
            )
            response = await transport.handle_async_request(request)
            try:
                async for _ in response.aiter_bytes():
                    pass
            finally:
                await response.aclose()
            return response.status_code

        calls = {
            "httpx2-request": via_request,
            "httpx2": via_httpx2,
            "httpx2-transport": via_transport,
            "h11": lambda: lean.request(target, BODY, False),
            "h11-prebuilt": lambda: lean_pre.request(target, BODY, True),
        }
        for name in NAMES:  # warm each connection up
            for _ in range(20):
                await calls[name]()
        print(json.dumps({"ready": True}), flush=True)
        for i in range(n):
            order = NAMES[i % len(NAMES) :] + NAMES[: i % len(NAMES)]
            for name in order:
                await trio.sleep(pace)
                _FIRST_WRITE.clear()
                start = time.perf_counter()
                status = await calls[name]()
                back = time.perf_counter()
                line = {"name": name, "start": start, "back": back, "status": status}
                line["write"] = _FIRST_WRITE[0] if _FIRST_WRITE else None
                os.write(1, (json.dumps(line) + "\n").encode())


async def _driver(args: argparse.Namespace) -> dict[str, Any]:
    from band_trio.platform import open_platform

    load = [os.getloadavg()]
    async with open_platform(seed=True) as platform:
        info = platform.info
        argv = [
            sys.executable,
            __file__,
            "--client",
            info.rest_url,
            info.api_key or "",
            info.room_id or "",
        ]
        argv += [str(args.n), str(args.pace)]
        result = await trio.run_process(argv, capture_stdout=True, check=True)
        entries = [
            e.t
            for e in platform.log(0)
            if e.kind == "rest" and e.method == "POST" and (e.path or "").endswith("/activity")
        ]
    load.append(os.getloadavg())
    lines = [json.loads(x) for x in result.stdout.decode().splitlines()]
    ready = next(i for i, x in enumerate(lines) if x.get("ready"))
    timed = lines[ready + 1 :]
    entries = entries[-len(timed) :]  # the warm-up requests came first
    samples: dict[str, dict[str, list[float]]] = {
        n: {"in": [], "rtt": [], "write": []} for n in NAMES
    }
    for line, entered in zip(timed, entries, strict=True):
        s = samples[line["name"]]
        s["in"].append((entered - line["start"]) * 1000)
        s["rtt"].append((line["back"] - line["start"]) * 1000)
        if line["write"] is not None:
            s["write"].append((line["write"] - line["start"]) * 1000)
    return {"load": load, "n": args.n, "pace": args.pace, "samples": samples}


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        url, key, room, n, pace = sys.argv[2:7]
        trio.run(_client, url, key, room, int(n), float(pace))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=300, help="requests per client")
    parser.add_argument("--pace", type=float, default=0.05, help="idle seconds before each")
    parser.add_argument("--json")
    args = parser.parse_args()
    result = trio.run(_driver, args)
    print(
        f"load: {result['load']}; {args.n} requests per client, {args.pace * 1000:g} ms idle each"
    )
    head = "| client | call → first write p50 | call → platform entry p50 / p99 |"
    print(head + " round trip p50 / p99 |")
    print("|---|---:|---:|---:|")
    for name, s in result["samples"].items():
        print(
            f"| {name} | {statistics.median(s['write']):.3f} | {statistics.median(s['in']):.3f} / "
            f"{_p(s['in'], 0.99):.3f} | {statistics.median(s['rtt']):.3f} / "
            f"{_p(s['rtt'], 0.99):.3f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
