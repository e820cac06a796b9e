"""A lean HTTP/1.1 client on trio streams (h11): the REST client's connection pool.

    pool = HttpPool("https://platform.example", headers, connections=32, context=ctx)
    answer = await pool.request("POST", "/api/v1/agent/chats/R/activity", body, limit)
    await pool.aclose()

Why not httpx2 for this: a signal's marks and reports are single small requests
to one origin, sent after the agent sat idle on its model, and there httpx2's
client side costs ~0.6 ms cold before the first byte leaves (client layer,
request model, httpcore's pool, headers and body written separately); this
costs ~0.16 ms (`benchmarks/rest_client.py`, docs/discussion/dependencies.md).
It keeps what httpx2 gave the REST client:

- **a pool**: at most `connections` keep-alive connections to the one origin; a
  request waits for a free one under its caller's deadline, in the pool's one
  gate (`Lanes`): an `urgent` one (a final mark) before any other waiting one,
  and `on_slot` told the moment it has one (a settling's grace starts there);
- **TLS** for an `https` URL, with the process's one context
  (`band_trio.tls.shared_ssl_context`: system CAs, hostname checked);
- **bounded reads**: an answer announced or running past `limit` bytes raises
  `HttpTooLarge`, and its connection is closed, not pooled;
- **no poisoned connection**: one that saw a cancel, an error or an answer not
  read to its end is closed, never reused; a pooled one the server closed
  meanwhile (or that has bytes nobody asked for) is dropped before use, and a GET
  that a pooled one failed under (closed as it went out) is sent once more on a
  new connection.

It sets no timeout of its own: every request runs under its caller's trio
deadline (`RestClient`: `Policy.request_deadline`). Its errors, all under
`HttpTransportError`, are translated into band-trio's tree at one seam,
`link._rest.map_transport_errors`.
"""

from __future__ import annotations

import logging
import select
import ssl
import urllib.parse
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import h11
import trio

from ._lanes import Lanes

__all__ = [
    "Answer",
    "HttpBroken",
    "HttpPool",
    "HttpProtocolError",
    "HttpTooLarge",
    "HttpTransportError",
    "HttpUnsent",
]

_READ = 65536
_IDEMPOTENT = frozenset({"GET", "HEAD"})
"""Methods a broken exchange on a reused connection sends once more."""
log = logging.getLogger("band_trio.link.http")


class HttpTransportError(Exception):
    """The exchange failed below HTTP: no answer to read."""


class HttpUnsent(HttpTransportError):
    """No byte of the request left: the connection (or its TLS) could not be made."""


class HttpBroken(HttpTransportError):
    """The connection failed after the request began to leave: it may have been acted on."""


class HttpProtocolError(HttpTransportError):
    """The server's bytes are not an HTTP/1.1 answer h11 can read."""


class HttpTooLarge(HttpTransportError):
    """The answer is (or is announced) longer than the caller's limit."""


@dataclass(frozen=True, slots=True)
class Answer:
    status_code: int
    headers: Mapping[str, str]
    """Names in lower case (h11 reads them so)."""
    body: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300


class _Connection:
    __slots__ = ("h11", "stream")

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)

    def fresh(self) -> bool:
        """Nothing to read on an idle connection: the server did not close it (EOF
        would be readable) and sent nothing unasked for."""
        sock = self.stream
        if isinstance(sock, trio.SSLStream):
            sock = sock.transport_stream
        assert isinstance(sock, trio.SocketStream)
        poll = select.poll()  # not select(): a bridge's descriptors pass FD_SETSIZE
        poll.register(sock.socket.fileno(), select.POLLIN)
        return not poll.poll(0)


class HttpPool:
    """Keep-alive connections to one origin. Use as `async with` or call `aclose()`."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        *,
        connections: int,
        context: ssl.SSLContext | None,
        close_grace: float,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        self._tls = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._tls else 80)
        authority = self._host if ":" not in self._host else f"[{self._host}]"
        if parts.port is not None:
            authority = f"{authority}:{parts.port}"
        self._context = context
        self._close_grace = close_grace
        self._headers = [("host", authority), *headers.items()]
        """Built once; each request adds only its content-length."""
        self._gate = Lanes(connections)
        """The one bound on requests in flight, marks first (once a gate in front of
        a semaphore here: two bounds of the same size, the inner one never waited)."""
        self._idle: deque[_Connection] = deque()
        self._closed = False

    async def __aenter__(self) -> HttpPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every idle connection (bounded by the close grace, shielded)."""
        self._closed = True
        with trio.move_on_after(self._close_grace, shield=True):
            while self._idle:
                await self._idle.popleft().stream.aclose()

    @property
    def gate(self) -> Lanes:
        """Requests in flight and waiting (read-only use: `in_flight`, `waiting`)."""
        return self._gate

    async def request(
        self,
        method: str,
        target: str,
        body: bytes | None,
        limit: int,
        *,
        urgent: bool = False,
        on_slot: Callable[[], None] | None = None,
    ) -> Answer:
        """One exchange on a pooled (or new) connection; the answer read up to `limit`.
        It waits for a slot first (`urgent` ones before the others), and tells
        `on_slot` once it has one."""
        if self._closed:
            raise HttpUnsent("the client is closed")
        gate = self._gate
        await gate.acquire(urgent=urgent)  # a free slot without a scheduling round
        try:
            if on_slot is not None:
                on_slot()
            return await self._on_connection(method, target, body, limit)
        finally:
            gate.release()

    async def _on_connection(
        self, method: str, target: str, body: bytes | None, limit: int
    ) -> Answer:
        """The exchange on a pooled connection (else a new one). A reused keep-alive
        connection can be closed by the server just as the request goes out (its
        keep-alive timer ran out: the freshness check saw nothing yet); a GET, which
        reads and changes nothing, is then sent once more, on a new connection. Any
        other method is not: the server may have acted on it, and the caller's rules
        decide (`RestClient`: ambiguous posts are reconciled, not repeated)."""
        conn, reused = await self._connection()
        try:
            return await self._on(conn, method, target, body, limit)
        except HttpBroken as exc:
            if not reused or method not in _IDEMPOTENT:
                raise
            log.debug("%s %s on a reused connection: %s; once more on a new one",
                      method, target, exc)  # fmt: skip
        conn, _ = await self._connection(reuse=False)
        return await self._on(conn, method, target, body, limit)

    async def _on(
        self, conn: _Connection, method: str, target: str, body: bytes | None, limit: int
    ) -> Answer:
        """One exchange on `conn`; pooled after it if it can be reused, else closed."""
        try:
            answer = await self._exchange(conn, method, target, body, limit)
        except BaseException:
            with trio.CancelScope(shield=True):  # never pooled after a failure
                await trio.aclose_forcefully(conn.stream)
            raise
        log.debug("HTTP Request: %s %s %d", method, target, answer.status_code)
        if conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE:
            conn.h11.start_next_cycle()
            self._idle.append(conn)
        else:  # the server asked to close (or HTTP/1.0): not reusable
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(conn.stream)
        return answer

    async def _connection(self, *, reuse: bool = True) -> tuple[_Connection, bool]:
        """A connection, and whether it is a pooled one (`reuse`: one may be)."""
        while reuse and self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to be stale
            if conn.fresh():
                return conn, True
            await trio.aclose_forcefully(conn.stream)
        try:
            stream: trio.abc.Stream = await trio.open_tcp_stream(self._host, self._port)
        except OSError as exc:
            raise HttpUnsent(f"cannot connect to {self._host}:{self._port}: {exc}") from exc
        if self._tls:
            assert self._context is not None
            tls = trio.SSLStream(
                stream, self._context, server_hostname=self._host, https_compatible=True
            )
            try:
                await tls.do_handshake()
            except BaseException as exc:
                await trio.aclose_forcefully(stream)
                if isinstance(exc, trio.BrokenResourceError | ssl.SSLError | OSError):
                    raise HttpUnsent(f"TLS with {self._host} failed: {exc!r}") from exc
                raise
            if tls.selected_alpn_protocol() not in (None, "http/1.1"):
                await trio.aclose_forcefully(tls)
                raise HttpUnsent(f"{self._host} chose {tls.selected_alpn_protocol()}")
            stream = tls
        return _Connection(stream), False

    async def _exchange(
        self, conn: _Connection, method: str, target: str, body: bytes | None, limit: int
    ) -> Answer:
        machine = conn.h11
        headers = self._headers
        if body is not None or method in ("POST", "PUT", "PATCH"):
            headers = [*headers, ("content-length", str(len(body or b"")))]
        try:
            data = machine.send(h11.Request(method=method, target=target, headers=headers)) or b""
            if body:
                data += machine.send(h11.Data(data=body)) or b""
            data += machine.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError as exc:  # a target or header h11 will not write:
            # nothing left, but trying again cannot help either, so not HttpUnsent
            raise HttpTransportError(f"cannot send {method} {target}: {exc}") from exc
        try:
            await conn.stream.send_all(data)  # head and body in one write
            return await _answer(conn, limit)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise HttpBroken(f"{method} {target}: the connection failed: {exc!r}") from exc
        except h11.RemoteProtocolError as exc:
            raise HttpProtocolError(f"{method} {target}: {exc}") from exc


async def _answer(conn: _Connection, limit: int) -> Answer:
    machine, stream = conn.h11, conn.stream
    status = 0
    headers: dict[str, str] = {}
    body = bytearray()
    ended = False
    while True:
        try:
            event = machine.next_event()
        except h11.RemoteProtocolError as exc:
            if ended:  # cut off mid-answer (a server killed while it wrote): no answer
                raise HttpBroken(f"the server closed the connection mid-answer ({exc})") from exc
            raise
        if event is h11.NEED_DATA:
            data = await stream.receive_some(_READ)
            if not data and machine.their_state is h11.SEND_RESPONSE:
                raise HttpBroken("the server closed the connection without an answer")
            ended = not data
            machine.receive_data(bytes(data))
        elif isinstance(event, h11.Response):
            status = event.status_code
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers}
            announced = headers.get("content-length", "")
            if announced.isdigit() and int(announced) > limit:
                raise HttpTooLarge(f"an answer of {announced} bytes, over the {limit}-byte limit")
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > limit:
                raise HttpTooLarge(
                    f"the answer ran past the {limit}-byte limit (Policy.max_response_body)"
                )
        elif isinstance(event, h11.EndOfMessage):
            return Answer(status, headers, bytes(body))
        elif isinstance(event, h11.ConnectionClosed):
            raise HttpBroken("the server closed the connection mid-answer")
        # h11.InformationalResponse (1xx): read on to the real answer
