"""A JSON-RPC 2.0 peer over a child process's stdin and stdout, on trio: the one the
Copilot and ACP adapters share, each with the codec of its protocol.

    rpc = JsonRpcPeer(proc.stdin, proc.stdout, LineCodec(max_frame), name="the agent",
                      on_notification=route, on_request=answer, outbox=64,
                      gone=AcpGone, refused=AcpRpcError)
    nursery.start_soon(rpc.serve)                        # reader, writer, request handlers
    result = await rpc.request("session/new", {...})      # the caller's deadline governs
    await rpc.notify("session/cancel", {...})             # queued whole, no answer
    rpc.post("session.permissions.handle...", {...})      # a request, its answer only logged

The codec (`Codec`) is all that differs between protocols: the Copilot CLI frames
with `Content-Length` headers, ACP with one message a line (`_rpc_codecs`). Both
bound what they hold (`max_frame`) and count what they drop.

The tasks, all owned by whoever runs `serve` (the child's supervisor):

* **the reader** decodes stdout and never waits on anything else: a response
  wakes its request, a notification goes to `on_notification` (which must not
  block), a request of the peer's is handed to a task of its own;
* **a task per request of the peer's** runs `on_request(method, params)` and
  sends its answer: it may wait (a permission request may wait on a human),
  so the reader never does. At most `outbox` of them run at once; one more is
  answered "busy" (-32000). Without `on_request` every request is refused
  (-32601), and so is a method `on_request` does not know (it raises `RpcFault`);
* **the writer** is the only one that writes to stdin, one whole frame at a
  time, from a bounded outbox. A cancelled request therefore never leaves half a
  frame on the pipe, and a peer that stops reading blocks new requests (each
  under its caller's deadline) instead of the reader.

When stdout ends, the framing breaks, or `close()` is called, the peer is closed:
every request waiting for an answer (and every later one) raises `gone(reason)`,
and the request handlers still running are cancelled.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

from ._rpc_codecs import FramingError

__all__ = ["Call", "Codec", "JsonRpcPeer", "RpcFault"]

log = logging.getLogger("band_trio.adapters")

_READ_SIZE = 65536

Handler = Callable[[str, dict[str, Any]], Awaitable[Any]]


class Codec(Protocol):
    """A protocol's framing, sans-IO: bytes in, whole messages out; messages to bytes."""

    oversized: int
    """Messages skipped for being larger than the codec's limit."""
    malformed: int
    """Messages dropped for not being a JSON object."""

    def feed(self, data: bytes | bytearray) -> list[dict[str, Any]]:
        """The messages completed by `data`, in order; raises `FramingError`."""
        ...

    def encode(self, message: dict[str, Any]) -> bytes:
        """One message, framed, ready to write."""
        ...


class RpcFault(Exception):
    """Raised by an `on_request` handler: the peer's request is answered with this error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Call:
    """A request sent and its answer, once it came: what `JsonRpcPeer.call` returns, for
    a request whose answer outlives the task that sent it (ACP's `session/prompt`,
    answered only after a cancel the turn's stop sends)."""

    __slots__ = ("_forget", "done", "error", "method", "result")

    def __init__(self, method: str, forget: Callable[[], None]) -> None:
        self.method = method
        self.done = trio.Event()
        self.result: Any = None
        self.error: Exception | None = None
        self._forget = forget

    async def wait(self) -> Any:
        """The result, once answered (the caller's deadline governs); raises the error."""
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.result

    def forget(self) -> None:
        """Nobody waits for the answer any more: it is dropped when it comes."""
        self._forget()


class JsonRpcPeer:
    """Requests to a child and what it sends back; see the module.

    `gone(reason)` and `refused(method, code, message)` make the errors its callers
    see (the adapter's own classes: `CopilotGone`, `AcpRpcError`, ...); `name` is
    how the reasons name the child ("the Copilot CLI")."""

    def __init__(
        self,
        send: trio.abc.SendStream,
        receive: trio.abc.ReceiveStream,
        codec: Codec,
        *,
        name: str,
        on_notification: Callable[[str, dict[str, Any]], None],
        on_request: Handler | None = None,
        outbox: int,
        gone: Callable[[str], Exception],
        refused: Callable[[str, int, str], Exception],
    ) -> None:
        self._send = send
        self._receive = receive
        self._codec = codec
        self.name = name
        self._on_notification = on_notification
        self._on_request = on_request
        self._gone = gone
        self._refused = refused
        self._out, self._out_receive = trio.open_memory_channel[bytes](outbox)
        self._ids = itertools.count(1)
        self._pending: dict[int, Call] = {}
        self._posted: dict[int, str] = {}
        """Requests sent without waiting (id → method): their answers are only logged."""
        self._outbox = outbox
        self._handling = 0
        self._handlers: trio.Nursery | None = None
        """`serve`'s own nursery, where the reader starts a task per request of the
        peer's: private, and only ever used by the reader."""
        self.closed = trio.Event()
        self.reason = ""
        """Why the connection closed, once it did."""

    @property
    def oversized(self) -> int:
        return self._codec.oversized

    @property
    def malformed(self) -> int:
        return self._codec.malformed

    # -- calls ----------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and return its result; raises `refused(...)` or `gone(...)`.

        No deadline of its own: the caller's governs. Cancelling it is safe at any
        point (the frame is queued whole or not at all; a late answer is dropped)."""
        call = await self.call(method, params)
        try:
            return await call.wait()
        finally:
            call.forget()

    async def call(self, method: str, params: dict[str, Any]) -> Call:
        """Send a request and return at once with its `Call`: whoever holds it waits for
        the answer (`wait`) and drops it when done (`forget`). Raises `gone(...)`."""
        if self.closed.is_set():
            raise self._gone(self.reason)
        request_id = next(self._ids)

        def forget() -> None:
            self._pending.pop(request_id, None)

        call = self._pending[request_id] = Call(method, forget)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            await self._queue(frame)
        except BaseException:
            call.forget()
            raise
        return call

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification (no answer); raises `gone(...)` if the peer is closed.
        It waits only for room in the outbox, under the caller's deadline."""
        await self._queue({"jsonrpc": "2.0", "method": method, "params": params})

    def post(self, method: str, params: dict[str, Any]) -> bool:
        """Send a request without waiting for its answer (a failure is logged); False if
        the outbox is full or the connection closed, and nothing was sent."""
        if self.closed.is_set() or len(self._posted) >= self._outbox:
            return False
        request_id = next(self._ids)
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            self._out.send_nowait(self._codec.encode(frame))
        except (trio.WouldBlock, trio.ClosedResourceError):
            return False
        self._posted[request_id] = method
        return True

    async def _queue(self, frame: dict[str, Any]) -> None:
        if self.closed.is_set():
            raise self._gone(self.reason)
        try:
            await self._out.send(self._codec.encode(frame))
        except trio.ClosedResourceError:
            raise self._gone(self.reason) from None

    def close(self, reason: str) -> None:
        """Close the connection: every waiting request raises `gone(reason)`."""
        if self.closed.is_set():
            return
        self.reason = reason
        self.closed.set()
        for pending in self._pending.values():
            pending.error = self._gone(reason)
            pending.done.set()
        self._out.close()

    # -- the tasks --------------------------------------------------------------

    async def serve(self) -> None:
        """Read and write until the connection closes (stdout ended, a framing error,
        or `close()`); returns then, having closed it and cancelled the handlers."""
        async with trio.open_nursery() as nursery:
            self._handlers = nursery
            nursery.start_soon(self._write, name=f"{self.name}: rpc writer")
            try:
                await self._read()
            finally:
                self._handlers = None
                nursery.cancel_scope.cancel()

    async def _read(self) -> None:
        reason = f"{self.name} closed its stdout"
        try:
            while not self.closed.is_set():
                chunk = await self._receive.receive_some(_READ_SIZE)
                if not chunk:
                    break
                for message in self._codec.feed(chunk):
                    self._dispatch(message)
        except FramingError as exc:
            reason = f"{self.name}'s output is not JSON-RPC as framed: {exc}"
            log.warning("%s", reason)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            reason = f"reading {self.name}'s stdout failed: {exc!r}"
        finally:
            self.close(reason)

    async def _write(self) -> None:
        try:
            async for frame in self._out_receive:
                await self._send.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self.close(f"{self.name} closed its stdin: {exc!r}")

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        request_id = message.get("id")
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if request_id is None:
                self._on_notification(method, params)
            elif not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
                self._codec.malformed += 1
            else:
                self._take(request_id, method, params)
            return
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            self._codec.malformed += 1
            return
        error = message.get("error")
        posted = self._posted.pop(request_id, None)
        if posted is not None:
            if error is not None:
                log.warning("%s refused %s: %r", self.name, posted, error)
            return
        pending = self._pending.get(request_id)
        if pending is None:
            return  # its caller gave up on it
        if isinstance(error, dict):
            code = error.get("code")
            pending.error = self._refused(
                pending.method,
                code if isinstance(code, int) else -1,
                str(error.get("message", "")),
            )
        else:
            pending.result = message.get("result")
        pending.done.set()

    def _take(self, request_id: int | str, method: str, params: dict[str, Any]) -> None:
        """A request of the peer's: handled in a task of its own, or refused at once."""
        nursery = self._handlers
        if self._on_request is None or nursery is None:
            log.debug("refusing %s's request %s", self.name, method)
            self._answer_now(request_id, -32601, f"band-trio does not handle {method}")
        elif self._handling >= self._outbox:
            log.warning("%s sent more requests than band-trio handles at once", self.name)
            self._answer_now(request_id, -32000, "busy: too many requests at once")
        else:
            self._handling += 1
            nursery.start_soon(self._handle, request_id, method, params, self._on_request)

    async def _handle(
        self, request_id: int | str, method: str, params: dict[str, Any], handler: Handler
    ) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        try:
            frame["result"] = await handler(method, params)
        except RpcFault as fault:
            frame["error"] = {"code": fault.code, "message": fault.message[:500]}
        except Exception as exc:  # the handler's bug: the peer gets an answer all the same
            log.exception("answering %s's request %s failed", self.name, method)
            frame["error"] = {"code": -32603, "message": f"{type(exc).__name__}"}
        finally:
            self._handling -= 1
        try:
            await self._queue(frame)
        except Exception:  # closed meanwhile: nobody is left to answer
            log.debug("%s closed before its %s request was answered", self.name, method)

    def _answer_now(self, request_id: int | str, code: int, message: str) -> None:
        frame = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
        try:
            self._out.send_nowait(self._codec.encode(frame))
        except (trio.WouldBlock, trio.ClosedResourceError):
            log.warning("could not answer %s's request: the outbox is full", self.name)
