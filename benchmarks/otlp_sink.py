"""A local OTLP/HTTP trace receiver that counts what it is sent: the collector of the
"tracing on" benchmark (docs/benchmarks.md § Tracing).

    .venv/bin/python benchmarks/otlp_sink.py --port 4318 &
    BAND_TRACES=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 \\
        .venv/bin/band-trio bench --quick

`band-trio bench` passes `BAND_TRACES` and `OTEL_*` to the band-trio agent it
runs, so that agent exports every span here, as it would to a collector. On
SIGINT/SIGTERM the sink prints how many requests and spans it took, and exits.
"""

from __future__ import annotations

import argparse
import signal
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Sink:
    """The ASGI app: counts every export (and, with `keep`, keeps it decoded, which
    tests/observe/test_traces_process.py reads)."""

    def __init__(self, *, keep: bool = False) -> None:
        self.requests = 0
        self.spans = 0
        self.kept: list[ExportTraceServiceRequest] | None = [] if keep else None
        self.changed = trio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            self.requests += 1
            self.spans += sum(
                len(scoped.spans) for rs in request.resource_spans for scoped in rs.scope_spans
            )
            if self.kept is not None:
                self.kept.append(request)
            self.changed.set()
            self.changed = trio.Event()
        headers = [(b"content-type", b"application/x-protobuf"), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


async def main(port: int) -> None:
    sink = Sink()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = config.errorlog = None
    done = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(serve, sink, config, shutdown_trigger=done.wait))

            async for _ in signals:
                done.set()
                break
    print(f"otlp sink: {sink.requests} requests, {sink.spans} spans", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=4318)
    trio.run(main, parser.parse_args().port)
