"""The websocket message cap of the server seam, held as the bytes arrive.

Every band-trio server that takes websockets (the embedded platform's agent and
console sockets) serves through `band_trio.server.serve`, whose
`ServeSettings.ws_max_message` is the longest message it reads. hypercorn 0.18.0
checked that size in its message buffer: after wsproto had inflated a
permessage-deflate frame (one 204 KB frame grew the platform by 250 to 315 MB) and,
once over the cap, it sent its 1009 and went on writing into that buffer for as
long as the client sent (a 100 MB frame: +100 MB).

Each attack here is sent byte for byte by a raw client to a server built by
`serve`, with the Python heap traced (`tracemalloc`: the server and the client
share the process; the client only ever holds one piece): the server refuses or
closes before it holds more than the cap, and says why with a close frame.
"""

from __future__ import annotations

import functools
import random
import struct
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from hypercorn.protocol import h2, h11

from band_trio.server import ServeSettings, serve
from band_trio.server._websocket import CappedWSStream

DEADLINE = 10
CAP = 1024 * 1024
"""The servers here read messages of at most 1 MiB..."""
SLACK = 2 * 1024 * 1024
"""...and may hold this much more while reading one (a read of the socket, the copies
wsproto makes of it); what the bugs held was 16 to 100 MiB."""
MASK = b"\0\0\0\0"
"""A client masks its frames; XOR with zeros leaves the payload as it is."""
TEXT, BINARY, CONTINUATION, CLOSE, PING = 0x1, 0x2, 0x0, 0x8, 0x9
PIECE = b"\xa5" * (64 * 1024)


class Recorder:
    """An ASGI app: accepts a websocket and answers each message with its length in
    bytes (UTF-8 for text), so a client knows what arrived."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "websocket"
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        while (message := await receive())["type"] == "websocket.receive":
            text = message.get("text")
            data = text.encode() if text is not None else message["bytes"]
            self.sizes.append(len(data))
            await send({"type": "websocket.send", "text": str(len(data))})


@asynccontextmanager
async def serving(cap: int = CAP) -> AsyncIterator[tuple[int, Recorder]]:
    """A server built by `serve` on loopback with this cap: (its port, its app)."""
    app = Recorder()
    settings = ServeSettings(grace=1.0, ws_max_message=cap)
    async with trio.open_nursery() as nursery:
        stop = trio.Event()
        listening = await nursery.start(
            functools.partial(serve, app, "127.0.0.1", 0, settings, stop=stop)
        )
        try:
            yield listening.port, app
        finally:
            stop.set()


def frame(
    opcode: int, payload: bytes = b"", *, fin: bool = True, rsv1: bool = False, length: int = -1
) -> bytes:
    """A masked client frame; `length` announces another payload length than `payload`'s
    (the rest sent by the caller)."""
    size = len(payload) if length < 0 else length
    head = bytes([(0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode])
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", size)
    return head + MASK + payload


@dataclass
class Client:
    """A websocket client over a raw socket: it frames by hand, as a hostile one would."""

    stream: trio.SocketStream
    extensions: str | None
    """The server's Sec-WebSocket-Extensions answer (None: none negotiated)."""
    pending: bytearray = field(default_factory=bytearray)

    @classmethod
    @asynccontextmanager
    async def open(cls, port: int, *offers: str) -> AsyncIterator[Client]:
        lines = [
            "GET /ws HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version: 13",
            *(f"Sec-WebSocket-Extensions: {offer}" for offer in offers),
        ]
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
            client = cls(stream, None)
            head = await client._read_until(b"\r\n\r\n")
            status, *headers = head.decode().split("\r\n")
            assert status.startswith("HTTP/1.1 101"), head
            for line in headers:
                name, _, value = line.partition(":")
                if name.strip().lower() == "sec-websocket-extensions":
                    client.extensions = value.strip()
            yield client

    async def _fill(self) -> bool:
        try:
            chunk = await self.stream.receive_some()
        except trio.BrokenResourceError:  # a reset: the server closed with bytes unread
            return False
        self.pending += chunk
        return bool(chunk)

    async def _read_until(self, end: bytes) -> bytes:
        while end not in self.pending:
            assert await self._fill(), bytes(self.pending)
        head, _, rest = bytes(self.pending).partition(end)
        self.pending = bytearray(rest)
        return head

    async def _read_exactly(self, size: int) -> bytes | None:
        while len(self.pending) < size:
            if not await self._fill():
                return None
        data = bytes(self.pending[:size])
        del self.pending[:size]
        return data

    async def frame(self) -> tuple[int, bytes] | None:
        """The server's next frame (opcode, payload); None when the connection ended."""
        head = await self._read_exactly(2)
        if head is None:
            return None
        size = head[1] & 0x7F
        if size >= 126:
            extended = await self._read_exactly(2 if size == 126 else 8)
            assert extended is not None
            (size,) = struct.unpack("!H" if len(extended) == 2 else "!Q", extended)
        payload = await self._read_exactly(size)
        assert payload is not None
        return head[0] & 0x0F, payload

    async def answer(self) -> int:
        """The app's answer to a message: its length."""
        got = await self.frame()
        assert got is not None and got[0] == TEXT, got
        return int(got[1])

    async def close_code(self) -> int | None:
        """The code of the server's close frame (skipping answers); None if the
        connection ended without one."""
        while (got := await self.frame()) is not None:
            if got[0] == CLOSE:
                (code,) = struct.unpack("!H", got[1][:2])
                return int(code)
        return None


@contextmanager
def traced() -> Iterator[list[int]]:
    """The peak of the Python heap's growth over the block, in bytes (in the list, once
    the block has ended)."""
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        peak: list[int] = []
        yield peak
        peak.append(tracemalloc.get_traced_memory()[1] - start)
    finally:
        tracemalloc.stop()


@functools.cache
def deflated(size: int, kind: str) -> bytes:
    """A permessage-deflate payload (RFC 7692: raw deflate, the final empty block's tail
    cut) that inflates to `size` bytes of zeros (~1000:1), of repeated JSON (~250:1)
    or of two letters at random (~4:1)."""
    if kind == "zeros":
        block = bytes(64 * 1024)
    elif kind == "json":
        block = b'{"topic":"room:1","event":"message","payload":{"content":"hi"}}' * 1024
    else:
        block = bytes(random.Random(7).choices(b"ab", k=64 * 1024))
    compressor = zlib.compressobj(1 if kind == "random" else 9, zlib.DEFLATED, -15)
    parts = [compressor.compress(block) for _ in range(size // len(block))]
    parts.append(compressor.flush(zlib.Z_SYNC_FLUSH)[:-4])
    return b"".join(parts)


async def test_http1_and_http2_upgrades_both_get_the_capped_stream() -> None:
    async with serving():  # hypercorn builds a websocket's stream by these names
        assert h11.WSStream is h2.WSStream is CappedWSStream


async def test_permessage_deflate_is_not_negotiated() -> None:
    async with serving() as (port, _):
        for offer in (
            "permessage-deflate",
            "permessage-deflate; client_max_window_bits",
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover",
            "x-webkit-deflate-frame",
        ):
            with trio.fail_after(DEADLINE):
                async with Client.open(port, offer) as client:
                    assert client.extensions is None, offer
                    await client.stream.send_all(frame(TEXT, b"still a websocket"))
                    assert await client.answer() == 17


@pytest.mark.parametrize(
    "offers",
    [
        ("permessage-deflate; server_max_window_bits=abc",),
        ("permessage-deflate; client_max_window_bits=8",),
        ("permessage-deflate; server_max_window_bits=16, permessage-deflate",),
        ("permessage-deflate", "permessage-deflate; client_max_window_bits=9"),
        ("permessage-deflate;;;=;client_max_window_bits=",),
    ],
    ids=repr,
)
async def test_an_odd_offer_is_an_ordinary_websocket(offers: tuple[str, ...]) -> None:
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port, *offers) as client:
                assert client.extensions is None
                await client.stream.send_all(frame(BINARY, b"x" * 1000))
                assert await client.answer() == 1000
    assert app.sizes == [1000]


@pytest.mark.parametrize("kind", ["zeros", "json", "random"])
@pytest.mark.parametrize("pieces", [1, 16], ids=["one frame", "16 frames"])
async def test_a_deflate_bomb_is_refused_before_it_inflates(kind: str, pieces: int) -> None:
    bomb = deflated(16 * CAP, kind)
    step = -(-len(bomb) // pieces)
    parts = [bomb[i : i + step] for i in range(0, len(bomb), step)]
    frames = [
        frame(BINARY if i == 0 else CONTINUATION, part, fin=i == len(parts) - 1, rsv1=i == 0)
        for i, part in enumerate(parts)
    ]
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port, "permessage-deflate") as client:
                with traced() as peak:
                    for raw in frames:  # sent as a hostile client would, negotiated or not
                        try:
                            await client.stream.send_all(raw)
                        except trio.BrokenResourceError:
                            break
                    code = await client.close_code()
    # not negotiated, a compressed frame is a protocol error (1002); had it been, the
    # message would have been too big (1009): either way nothing reaches the app
    assert code in (1002, 1009)
    assert app.sizes == []
    assert peak[0] < CAP + SLACK, f"{peak[0] / 2**20:.1f} MiB"


async def test_a_compressed_frame_never_offered_is_closed_with_1002() -> None:
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port) as client:
                await client.stream.send_all(frame(TEXT, deflated(1024, "json"), rsv1=True))
                assert await client.close_code() == 1002
    assert app.sizes == []


async def test_a_100_mb_frame_is_closed_with_1009_before_the_server_holds_it() -> None:
    announced = 100 * 1000 * 1000
    sent = 0
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port) as client:
                with traced() as peak:

                    async def pour() -> None:  # on after the close frame, as a hostile one would
                        nonlocal sent
                        await client.stream.send_all(frame(BINARY, length=announced))
                        try:
                            while sent < announced:
                                await client.stream.send_all(PIECE[: announced - sent])
                                sent += len(PIECE)
                        except trio.BrokenResourceError:
                            pass  # the server has closed the connection

                    codes = []
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(pour)
                        codes.append(await client.close_code())
    assert codes == [1009]
    assert app.sizes == []
    assert peak[0] < CAP + SLACK, f"{peak[0] / 2**20:.1f} MiB"
    assert sent < announced // 4  # the server stopped reading long before the end


async def test_a_message_of_the_cap_arrives_and_one_byte_more_is_closed() -> None:
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port) as client:
                await client.stream.send_all(frame(BINARY, bytes(CAP)))  # the cap exactly
                assert await client.answer() == CAP
                await client.stream.send_all(frame(BINARY, length=CAP + 1) + bytes(CAP))
                await client.stream.send_all(b"\0")  # the byte over
                assert await client.close_code() == 1009
    assert app.sizes == [CAP]


async def test_fragments_whose_sum_passes_the_cap_are_closed_with_1009() -> None:
    piece = bytes(CAP // 8)
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE), traced() as peak:
            async with Client.open(port) as client:
                await client.stream.send_all(frame(BINARY, piece, fin=False))
                for _ in range(7):
                    await client.stream.send_all(frame(CONTINUATION, piece, fin=False))
                await client.stream.send_all(frame(PING, b"still there?"))  # between fragments
                await client.stream.send_all(frame(CONTINUATION, b"\0", fin=False))
                assert await client.close_code() == 1009  # the pong, skipped, came first
    assert app.sizes == []
    assert peak[0] < CAP + SLACK, f"{peak[0] / 2**20:.1f} MiB"


async def test_many_tiny_frames_count_toward_the_cap() -> None:
    cap = 16 * 1024
    tiny = frame(CONTINUATION, b"ab", fin=False)
    async with serving(cap) as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port) as client:
                await client.stream.send_all(frame(TEXT, b"ab", fin=False) + tiny * (cap // 2 - 2))
                await client.stream.send_all(frame(CONTINUATION, b"ab"))  # the cap exactly
                assert await client.answer() == cap
                await client.stream.send_all(frame(TEXT, b"ab", fin=False) + tiny * (cap // 2))
                assert await client.close_code() == 1009
    assert app.sizes == [cap]


async def test_text_counts_its_utf8_bytes() -> None:
    accented = "é".encode()  # two bytes, one character
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port) as client:
                await client.stream.send_all(frame(TEXT, accented * (CAP // 2)))
                assert await client.answer() == CAP
                await client.stream.send_all(frame(TEXT, accented * (CAP // 2) + b"a"))
                assert await client.close_code() == 1009
    assert app.sizes == [CAP]


async def test_each_message_has_the_whole_cap_and_the_server_serves_on() -> None:
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port) as client:
                for _ in range(3):
                    await client.stream.send_all(frame(BINARY, bytes(CAP)))
                    assert await client.answer() == CAP
                await client.stream.send_all(frame(BINARY, bytes(CAP + 1)))
                assert await client.close_code() == 1009
                async with Client.open(port) as again:
                    await again.stream.send_all(frame(TEXT, b"next"))
                    assert await again.answer() == 4
    assert app.sizes == [CAP, CAP, CAP, 4]


async def test_invalid_utf8_is_closed_with_1007() -> None:
    async with serving() as (port, app):
        with trio.fail_after(DEADLINE):
            async with Client.open(port) as client:
                await client.stream.send_all(frame(TEXT, b"\xff\xfe"))
                assert await client.close_code() == 1007
    assert app.sizes == []
