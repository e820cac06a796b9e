"""A fault-injecting HTTP proxy on loopback, in front of a real peer (run as a process).

    python src/band_trio/bench/_peers/fault_proxy.py --port 0 --ready-file F --events-file E \
        [--upstream http://127.0.0.1:N] [--endless-ceiling BYTES]

Every request is forwarded to `--upstream` (stubllm, an a2a-sdk agent, the embedded
platform) unless a rule says otherwise. Rules are posted to the proxy itself:

    POST /__faults__   {"match": "some text", "plan": [STEP, STEP, ...]}
    DELETE /__faults__ (forget every rule)

A request whose raw bytes (request line, headers and body) contain `match` takes the
next STEP of the first such rule with steps left; one past the end is forwarded
unchanged (and still recorded with the rule's `match`). So a test names a message
(`"[quick] m17"`) and scripts what each attempt at it meets. A STEP is an object:

    {"status": 503, "retry_after": "1", "retry_after_ms": 50, "body": "..."}
                                answer that status (a JSON error body by default)
    {"status": 500, "endless": true}   that status, then a body that never ends
                                (up to --endless-ceiling bytes, then silence)
    {"drop_after": 3}           forward, and cut the connection after 3 stream events
                                (a body that is not a stream: after 3 bytes... of chunks)
    {"end_after": 3}            forward 3 events, then end the body cleanly (no finish)
    {"corrupt": 2}              forward, with event 2 (0-based) replaced by broken JSON
                                (its `event:` name, if it has one, kept)
    {"stall_after": 3}          forward 3 events, then say nothing more
    {"stall": true}             read the request and never answer
    {"reset": true}             close the connection without an answer
    {"pass": true}              forward unchanged

Every answer has `connection: close`. Events (one JSON object per line, each with
`event`, `perf` = time.perf_counter() and `time`):

    ready        port, url, pid
    request      n, method, path, match (the rule, or None), step (or None)
    response_end n, status, events (stream events forwarded), how
    rule         match, steps
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx2
import trio

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te"}
_CHUNK = b"x" * 65536
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


class Proxy:
    def __init__(self, upstream: str | None, events: Path, ceiling: int) -> None:
        self.upstream = upstream.rstrip("/") if upstream else None
        self.events = events.open("a", encoding="utf-8")
        self.ceiling = ceiling
        self.rules: list[dict[str, Any]] = []
        self.count = 0
        self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(None, connect=5.0))

    def emit(self, name: str, **fields: Any) -> None:
        record = {"event": name, "perf": time.perf_counter(), "time": time.time(), **fields}
        self.events.write(json.dumps(record) + "\n")
        self.events.flush()

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            async with stream:
                request = await read_request(stream)
                if request is not None:
                    await self._serve(stream, *request)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _serve(self, stream: trio.SocketStream, head: bytes, body: bytes, raw: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = line.partition(" ")
        target = rest.rsplit(" ", 1)[0]
        if target.startswith("/__faults__"):
            await self._control(stream, method, body)
            return
        self.count += 1
        n = self.count
        rule, step = self._take(raw)
        self.emit("request", n=n, method=method, path=target, match=rule, step=step)
        step = step or {}
        if step.get("reset"):
            self.emit("response_end", n=n, status=None, events=0, how="reset")
            return  # the connection closes unanswered
        if step.get("stall"):
            await _until_closed(stream)
            self.emit("response_end", n=n, status=None, events=0, how="stalled")
            return
        if "status" in step:
            await self._answer(stream, n, step)
            return
        await self._forward(stream, n, method, target, head, body, step)

    def _take(self, raw: bytes) -> tuple[str | None, dict[str, Any] | None]:
        text = raw.decode("utf-8", "replace")
        found = [rule for rule in self.rules if rule["match"] in text]
        for rule in found:
            if rule["plan"]:
                return rule["match"], rule["plan"].pop(0)
        return (found[0]["match"], None) if found else (None, None)

    async def _control(self, stream: trio.SocketStream, method: str, body: bytes) -> None:
        if method == "DELETE":
            self.rules.clear()
        else:
            rule = json.loads(body)
            steps = [s if isinstance(s, dict) else {"pass": True} for s in rule["plan"]]
            self.rules.append({"match": str(rule["match"]), "plan": steps})
            self.emit("rule", match=rule["match"], steps=steps)
        await stream.send_all(_response(204, {}) + b"")

    async def _answer(self, stream: trio.SocketStream, n: int, step: dict[str, Any]) -> None:
        status = int(step["status"])
        headers = {"content-type": "application/json"}
        if "retry_after" in step:
            headers["retry-after"] = str(step["retry_after"])
        if "retry_after_ms" in step:
            headers["retry-after-ms"] = str(step["retry_after_ms"])
        if step.get("endless"):
            await stream.send_all(_response(status, {**headers, "transfer-encoding": "chunked"}))
            sent, dropped = 0, True  # dropped: the client went away before the ceiling
            try:
                while sent < self.ceiling:
                    await stream.send_all(b"%x\r\n%s\r\n" % (len(_CHUNK), _CHUNK))
                    sent += len(_CHUNK)
                dropped = False
                await _until_closed(stream)
            finally:
                self.emit(
                    "response_end",
                    n=n,
                    status=status,
                    events=0,
                    how="endless",
                    sent=sent,
                    dropped=dropped,
                )
            return
        text = step.get("body")
        payload = (
            text.encode()
            if isinstance(text, str)
            else json.dumps({"error": {"message": f"injected {status}"}}).encode()
        )
        headers["content-length"] = str(len(payload))
        await stream.send_all(_response(status, headers) + payload)
        self.emit("response_end", n=n, status=status, events=0, how="injected")

    async def _forward(
        self,
        stream: trio.SocketStream,
        n: int,
        method: str,
        target: str,
        head: bytes,
        body: bytes,
        step: dict[str, Any],
    ) -> None:
        if self.upstream is None:
            payload = b"{}"
            headers = {"content-type": "application/json", "content-length": "2"}
            await stream.send_all(_response(200, headers) + payload)
            self.emit("response_end", n=n, status=200, events=0, how="no upstream")
            return
        forwarded_headers: list[tuple[str, str]] = []
        for header in head.split(b"\r\n")[1:]:
            name, _, value = header.decode("latin-1").partition(":")
            if name.strip().lower() not in _HOP:
                forwarded_headers.append((name.strip(), value.strip()))
        request = self.client.build_request(
            method, self.upstream + target, headers=forwarded_headers, content=body
        )
        response = await self.client.send(request, stream=True)
        forwarded, how = 0, "forwarded"
        try:
            out = {k: v for k, v in response.headers.items() if k.lower() not in _HOP}
            await stream.send_all(
                _response(response.status_code, {**out, "transfer-encoding": "chunked"})
            )
            async for event in _events(response):
                if "drop_after" in step and forwarded >= int(step["drop_after"]):
                    how = "dropped"
                    return  # closed without the last chunk: the body is cut
                if "end_after" in step and forwarded >= int(step["end_after"]):
                    how = "ended early"
                    break
                if "stall_after" in step and forwarded >= int(step["stall_after"]):
                    how = "stalled"
                    await _until_closed(stream)
                    return
                if step.get("corrupt") == forwarded:
                    event = _corrupted(event)
                await stream.send_all(b"%x\r\n%s\r\n" % (len(event), event))
                forwarded += 1
            await stream.send_all(b"0\r\n\r\n")
        finally:
            with trio.CancelScope(shield=True):
                await response.aclose()
            self.emit("response_end", n=n, status=response.status_code, events=forwarded, how=how)


def _corrupted(event: bytes) -> bytes:
    """The event with its data replaced by broken JSON; a named event (Anthropic's,
    `event: ...` first) keeps its name, so a client that reads only named events
    still reads it."""
    name = event.split(b"\n", 1)[0] + b"\n" if event.startswith(b"event:") else b""
    return name + b'data: {"choices": [{"delta": {"content": "broken\n\n'


async def _events(response: httpx2.Response) -> Any:
    """The body in units: server-sent events (each with its blank line), or raw chunks."""
    pending = b""
    stream = "text/event-stream" in response.headers.get("content-type", "")
    async for chunk in response.aiter_raw():
        pending += chunk
        while stream and (end := _EVENT_END.search(pending)):
            yield pending[: end.end()]
            pending = pending[end.end() :]
        if not stream and pending:
            yield pending
            pending = b""
    if pending:
        yield pending


def _response(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {'OK' if status < 400 else 'Error'}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _until_closed(stream: trio.SocketStream) -> None:
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def read_request(stream: trio.SocketStream) -> tuple[bytes, bytes, bytes] | None:
    """One whole HTTP/1.1 request (headers, and a `content-length` body): its head, its
    body, and both as sent; None if the client went away first (or sent 1 MiB of head)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        data += chunk
        if len(data) > 1 << 20:
            return None
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        body += chunk
    return head, body, head + b"\r\n\r\n" + body


async def main(args: argparse.Namespace) -> None:
    proxy = Proxy(args.upstream, Path(args.events_file), args.endless_ceiling)
    listeners = await trio.open_tcp_listeners(args.port, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proxy.emit("ready", port=port, url=url + "/", pid=os.getpid())
    ready = {"port": port, "url": url + "/", "base_url": url, "pid": os.getpid()}
    partial = trio.Path(args.ready_file + ".partial")  # a reader never sees half of it
    await partial.write_text(json.dumps(ready), encoding="utf-8")
    await partial.replace(args.ready_file)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, proxy.handle, listeners)
            async for signum in signals:
                proxy.emit("signal", signum=signum)
                nursery.cancel_scope.cancel()
                break
    await proxy.client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--events-file", required=True)
    parser.add_argument("--upstream")
    parser.add_argument("--endless-ceiling", type=int, default=256 * 1024 * 1024)
    trio.run(main, parser.parse_args())
