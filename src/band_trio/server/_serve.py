"""Serving an ASGI app with hypercorn's trio worker: `serve`, the one server seam.

    serve                            the owner's task; `stop` or a cancel closes it
    └── shielded, bounded once closing begins
        ├── accepting                trio.serve_listeners (ended first at the close)
        └── connections              one hypercorn TCPServer each, its socket bounded

The embedded platform, the runs API, the bridge's health endpoint and the host
all serve through here, so each of them gets, in one place:

* **the bind checked** by its caller (`check_bind`) and its errors as one line
  (`ConfigurationError: cannot listen on H:P: Address already in use`);
* **the browser defences** (`Guard`), whose Host allow-list needs the port
  actually bound (port 0 picks one), so the guard is built here;
* **bounded sends** — hypercorn shields every write to a socket, so a client that
  stops reading would hold the write, its buffer and the shutdown as long as it
  likes (a console left open in a stalled tab held `SIGTERM` for 150 s). Each
  connection's socket is wrapped: a write goes out in `ServerPolicy.send_chunk`
  pieces, each under `send_stall`; a client that takes nothing for that long is
  dropped (its socket closed, so hypercorn sees it gone and the app's `receive`
  says `http.disconnect`). Once closing begins, every write still waiting, and
  every later one, gets `closing_stall` instead;
* **an answer's end made whole** — the app's last send of an answer (the body
  message without `more_body`) is shielded (`_WholeEnds`): inside it hypercorn
  ends the exchange, tells the app `http.disconnect`, and recycles the
  connection (its keep-alive timer restarted) or closes it. An app whose own
  scope is cancelled there — a disconnect watch reacting to that very message
  — cut that step in half, and the connection was left with neither a request
  nor a timer: a client that held it open kept its fd as long as it liked
  (issue 38). The shield waits for nothing unbounded: the writes under it are
  bounded as above;
* **websockets capped as they are read** (`CappedWSStream`): no
  permessage-deflate, and a message counted before it is kept, so one past
  `ws_max_message` is closed with 1009 before the server holds more than that;
* **a graceful, bounded close** — no new connections; open requests get `grace`
  (hypercorn's `graceful_timeout`), then are cancelled. The server runs
  shielded, so a cancel from outside does not cut an answer off mid-frame: it
  begins the close like `stop` does, and the shield's deadline is set then.

hypercorn's own `serve` builds the sockets and the per-connection servers
itself, with no place for the wrapper; so this module drives those public
classes of hypercorn 0.18.0 (pinned exactly) the way its `worker_serve` does,
without the lifespan protocol, which no band-trio app uses.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app

from ..errors import ConfigurationError
from ..policy import ServerPolicy
from ._abort import connection_socket
from ._guard import Guard, allowed_hosts
from ._websocket import install as cap_websockets

__all__ = ["Listening", "ServeSettings", "serve"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeSettings:
    """What one server is given from its owner's policy."""

    grace: float
    """Open requests get this long at the close (hypercorn's `graceful_timeout`)."""
    policy: ServerPolicy = field(default_factory=ServerPolicy)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("band_trio.server"))
    """Where hypercorn's own error lines go."""
    backlog: int = 1024
    ws_max_message: int | None = None
    """Bytes of one websocket message read (None: hypercorn's default, 16 MiB), counted
    as they arrive; permessage-deflate is never negotiated (`_websocket`)."""


@dataclass(slots=True)
class Listening:
    """A server that listens: where, and its guard (the refusal counts)."""

    host: str
    port: int
    guard: Guard
    sends: _Sends

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def stalled(self) -> int:
        """Connections dropped because the client took nothing for `send_stall`."""
        return self.sends.stalled


class _Sends:
    """The deadlines of the writes in progress, so the close can shorten them."""

    def __init__(self, policy: ServerPolicy) -> None:
        self.policy = policy
        self.closing = False
        self.active: set[trio.CancelScope] = set()
        self.stalled = 0

    def deadline(self) -> float:
        policy = self.policy
        return trio.current_time() + (policy.closing_stall if self.closing else policy.send_stall)

    def close(self) -> None:
        self.closing = True
        bound = trio.current_time() + self.policy.closing_stall
        for scope in self.active:
            scope.deadline = min(scope.deadline, bound)


class _BoundedStream:
    """A connection's socket as hypercorn's TCPServer uses it, each write bounded.

    No `do_handshake`: TCPServer takes the AttributeError for "not TLS"."""

    def __init__(self, stream: trio.SocketStream, sends: _Sends) -> None:
        self._stream = stream
        self._sends = sends
        self.socket = stream.socket

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        size = self._sends.policy.send_chunk
        if not view:
            await trio.lowlevel.checkpoint()
        for start in range(0, len(view), size):
            with trio.CancelScope(deadline=self._sends.deadline()) as scope:
                self._sends.active.add(scope)
                try:
                    await self._stream.send_all(view[start : start + size])
                except trio.BusyResourceError:
                    # hypercorn's reader is closing the connection (`send_eof`) under
                    # the write: the connection is going, which is what this says
                    raise trio.BrokenResourceError("the connection is closing") from None
                finally:
                    self._sends.active.discard(scope)
            if scope.cancelled_caught:
                self._sends.stalled += 1
                await self._stream.aclose()
                raise trio.BrokenResourceError("the client stopped reading")

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._stream.receive_some(max_bytes)

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


class _WholeEnds:
    """Wrap an ASGI app so that the last send of each HTTP answer is shielded (the
    module docstring says why); every other message goes through as it is."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def whole(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                with trio.CancelScope(shield=True):
                    await send(message)
            else:
                await send(message)

        await self.app(scope, receive, whole)


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def _sockets(config: Config, host: str, port: int) -> list[socket.socket]:
    try:
        return list(config.create_sockets().insecure_sockets)
    except OSError as exc:
        _close_unbound(exc)
        why = exc.strerror or exc
        raise ConfigurationError(f"cannot listen on {host}:{port}: {why}") from None


def _close_unbound(exc: BaseException) -> None:
    """hypercorn 0.18.0 leaves the socket it failed to bind open (a port in use): close
    it, found where it was made, rather than leave it to the garbage collector."""
    frame = exc.__traceback__
    while frame is not None:
        for value in frame.tb_frame.f_locals.values():
            if isinstance(value, socket.socket):
                value.close()
        frame = frame.tb_next


async def serve(
    app: Any,
    host: str,
    port: int,
    settings: ServeSettings,
    *,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[Listening] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `app`, guarded, on `host:port` until `stop` is set or the caller cancels;
    `task_status.started(Listening)` once it listens. The close is graceful and
    bounded (the module docstring); both ways of asking for it are the same."""
    cap_websockets()
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = settings.log
    config.graceful_timeout = settings.grace
    config.backlog = settings.backlog
    config.keep_alive_timeout = settings.policy.keep_alive
    if settings.ws_max_message is not None:
        config.websocket_max_message_size = settings.ws_max_message
    sockets = _sockets(config, host, port)
    try:
        for sock in sockets:
            sock.listen(settings.backlog)
        bound = int(sockets[0].getsockname()[1])
        listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(s)) for s in sockets]
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    guard = Guard(app, allowed_hosts(host, bound), settings.policy.body_read)
    sends = _Sends(settings.policy)
    listening = Listening(host, bound, guard, sends)
    framework: Any = _WholeEnds(guard)  # hypercorn's Framework type wants TypedDict scopes
    wrapped = wrap_app(framework, config.wsgi_max_body_size, "asgi")
    context = WorkerContext(None)

    async def connection(stream: trio.SocketStream) -> None:
        bounded: Any = _BoundedStream(stream, sends)  # TCPServer's type says SSLStream
        connection_socket.set(stream.socket)  # for `abort_connection`, in the app's task
        await TCPServer(wrapped, config, context, ConnectionState({}), bounded)

    shield = trio.CancelScope(shield=True)
    closing = trio.Event()

    async def run() -> None:
        with shield:
            async with trio.open_nursery() as connections:
                async with trio.open_nursery() as accepting:
                    accepting.start_soon(
                        partial(
                            trio.serve_listeners, connection, listeners, handler_nursery=connections
                        )
                    )
                    await closing.wait()
                    accepting.cancel_scope.cancel(reason="the server is closing")
                await context.terminated.set()  # idle keep-alive connections close now
                connections.cancel_scope.deadline = trio.current_time() + settings.grace

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        task_status.started(listening)
        try:
            if stop is None:
                await trio.sleep_forever()
            else:
                await stop.wait()
        finally:
            sends.close()
            shield.deadline = trio.current_time() + settings.grace + settings.policy.closing_stall
            closing.set()
