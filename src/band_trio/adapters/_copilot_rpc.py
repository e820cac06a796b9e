"""A JSON-RPC 2.0 peer over the Copilot CLI's stdin and stdout, on trio.

    rpc = Rpc(proc.stdin, proc.stdout, on_notification=route, max_frame=..., outbox=64)
    nursery.start_soon(rpc.serve)                  # the reader and the writer
    result = await rpc.request("session.create", {...})   # the caller's deadline governs
    rpc.post("session.permissions.handlePendingPermissionRequest", {...})  # no waiting

Two tasks, owned by whoever runs `serve` (the CLI's supervisor):

* **the reader** decodes stdout (`_copilot_wire`) and never waits on anything
  else: a response wakes its request, a notification goes to `on_notification`
  (which must not block), and a request from the CLI — none is expected, as the
  sessions opt out of them — is refused (-32601) through the outbox;
* **the writer** is the only one that writes to stdin, one whole frame at a
  time, from a bounded outbox. A cancelled request therefore never leaves half
  a frame on the pipe, and a CLI that stops reading blocks new requests (each
  under its caller's deadline) instead of the reader.

When stdout ends, the framing breaks, or `close()` is called, the peer is
closed: every request waiting for an answer (and every later one) raises
`CopilotGone` with the reason.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

import trio

from ..errors import BandTrioError
from ._copilot_wire import FrameDecoder, FramingError, encode

__all__ = ["CopilotError", "CopilotGone", "CopilotRpcError", "Rpc"]

log = logging.getLogger("band_trio.adapters.copilot")

_READ_SIZE = 65536


class CopilotError(BandTrioError):
    """The Copilot CLI could not be started, refused a call, failed a message or exited."""


class CopilotRpcError(CopilotError):
    """The CLI answered a call with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method} answered error {code}: {message[:300]}")
        self.method = method
        self.code = code


class CopilotGone(CopilotError):
    """The connection to the CLI is closed (the process exited, or is being stopped)."""


class _Pending:
    __slots__ = ("done", "error", "method", "result")

    def __init__(self, method: str) -> None:
        self.method = method
        self.done = trio.Event()
        self.result: Any = None
        self.error: CopilotError | None = None


class Rpc:
    """Requests to the CLI and what it sends back; see the module."""

    def __init__(
        self,
        send: trio.abc.SendStream,
        receive: trio.abc.ReceiveStream,
        *,
        on_notification: Callable[[str, dict[str, Any]], None],
        max_frame: int,
        outbox: int,
    ) -> None:
        self._send = send
        self._receive = receive
        self._on_notification = on_notification
        self._decoder = FrameDecoder(max_frame)
        self._out, self._out_receive = trio.open_memory_channel[bytes](outbox)
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._posted: dict[int, str] = {}
        """Requests sent without waiting (id → method): their answers are only logged."""
        self._outbox = outbox
        self.closed = trio.Event()
        self.reason = ""
        """Why the connection closed, once it did."""

    @property
    def oversized(self) -> int:
        return self._decoder.oversized

    @property
    def malformed(self) -> int:
        return self._decoder.malformed

    # -- calls ----------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and return its result; raises `CopilotRpcError`, `CopilotGone`.

        No deadline of its own: the caller's governs. Cancelling it is safe at any
        point (the frame is queued whole or not at all; a late answer is dropped)."""
        if self.closed.is_set():
            raise CopilotGone(self.reason)
        request_id = next(self._ids)
        pending = self._pending[request_id] = _Pending(method)
        try:
            frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            try:
                await self._out.send(encode(frame))
            except trio.ClosedResourceError:
                raise CopilotGone(self.reason) from None
            await pending.done.wait()
        finally:
            del self._pending[request_id]
        if pending.error is not None:
            raise pending.error
        return pending.result

    def post(self, method: str, params: dict[str, Any]) -> bool:
        """Send a request without waiting for its answer (a failure is logged); False if
        the outbox is full or the connection closed, and nothing was sent."""
        if self.closed.is_set() or len(self._posted) >= self._outbox:
            return False
        request_id = next(self._ids)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            self._out.send_nowait(encode(frame))
        except (trio.WouldBlock, trio.ClosedResourceError):
            return False
        self._posted[request_id] = method
        return True

    def close(self, reason: str) -> None:
        """Close the connection: every waiting request raises `CopilotGone(reason)`."""
        if self.closed.is_set():
            return
        self.reason = reason
        self.closed.set()
        for pending in self._pending.values():
            pending.error = CopilotGone(reason)
            pending.done.set()
        self._out.close()

    # -- the two tasks ---------------------------------------------------------

    async def serve(self) -> None:
        """Read and write until the connection closes (stdout ended, a framing error,
        or `close()`); returns then, having closed it."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write, name="copilot rpc writer")
            try:
                await self._read()
            finally:
                nursery.cancel_scope.cancel()

    async def _read(self) -> None:
        reason = "the Copilot CLI closed its stdout"
        try:
            while not self.closed.is_set():
                chunk = await self._receive.receive_some(_READ_SIZE)
                if not chunk:
                    break
                for message in self._decoder.feed(chunk):
                    self._dispatch(message)
        except FramingError as exc:
            reason = f"the Copilot CLI's output is not JSON-RPC as framed: {exc}"
            log.warning("%s", reason)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            reason = f"reading the Copilot CLI's stdout failed: {exc!r}"
        finally:
            self.close(reason)

    async def _write(self) -> None:
        try:
            async for frame in self._out_receive:
                await self._send.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.close(f"the Copilot CLI closed its stdin: {exc!r}")

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        request_id = message.get("id")
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if request_id is None:
                self._on_notification(method, params)
            else:  # the sessions ask for no callbacks: refuse what comes anyway
                log.debug("refusing the Copilot CLI's request %s", method)
                refusal = {"code": -32601, "message": f"band-trio does not handle {method}"}
                try:
                    self._out.send_nowait(
                        encode({"jsonrpc": "2.0", "id": request_id, "error": refusal})
                    )
                except (trio.WouldBlock, trio.ClosedResourceError):
                    log.warning("could not refuse the Copilot CLI's request %s", method)
            return
        if not isinstance(request_id, int):
            self._decoder.malformed += 1
            return
        error = message.get("error")
        posted = self._posted.pop(request_id, None)
        if posted is not None:
            if error is not None:
                log.warning("the Copilot CLI refused %s: %r", posted, error)
            return
        pending = self._pending.get(request_id)
        if pending is None:
            return  # its caller gave up on it
        if isinstance(error, dict):
            code = error.get("code")
            pending.error = CopilotRpcError(
                pending.method,
                code if isinstance(code, int) else -1,
                str(error.get("message", "")),
            )
        else:
            pending.result = message.get("result")
        pending.done.set()
