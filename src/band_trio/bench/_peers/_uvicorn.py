"""What the two peer servers share: their event log, their ready file and how they serve.

Imported by `a2a_server.py` and `stubllm_server.py`, which run as scripts; both
serve an ASGI app under uvicorn on 127.0.0.1 and record what they saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import uvicorn

__all__ = ["EventLog", "listen", "serve"]


class EventLog:
    """Append-only JSON-lines log; one write + flush per event so readers see whole lines."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "perf": time.perf_counter(), "time": time.time(), **fields}
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()


def listen(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` (0: any free port), with TCP_NODELAY.

    proto=IPPROTO_TCP matters: asyncio/uvloop set TCP_NODELAY on accepted sockets only
    when the listening socket says IPPROTO_TCP. With proto 0, Nagle and the client's
    delayed ACK add ~40 ms to every small response after the first on a connection.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


async def serve(
    sock: socket.socket, app: Any, log: EventLog, ready_file: Path, log_level: str, **ready: Any
) -> None:
    """Serve `app` on `sock` until SIGTERM/SIGINT; once listening, log `ready` and write
    it (with `port` and `pid`) to `ready_file` atomically, so a reader sees all or nothing.

    uvicorn shuts down on the signal (at most 2 s grace), then re-raises it, so the
    process ends by that signal; the signal is logged first.
    """
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=sock.getsockname()[1],
        log_level=log_level,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    handle_exit = server.handle_exit

    def record_signal(sig: int, frame: Any) -> None:
        log.emit("signal", signum=sig)
        handle_exit(sig, frame)

    server.handle_exit = record_signal  # type: ignore[method-assign]
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            await serving  # startup failed: raise its error
            raise SystemExit("uvicorn exited during startup")
        await asyncio.sleep(0.005)
    data = {"port": sock.getsockname()[1], **ready, "pid": os.getpid()}
    log.emit("ready", **data)
    tmp = ready_file.with_name(ready_file.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, ready_file)
    await serving
    log.emit("shutdown")
