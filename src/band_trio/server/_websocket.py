"""hypercorn's websocket stream, its message cap held as the bytes arrive.

hypercorn 0.18.0 (pinned) reads a websocket message into a buffer and checks
the buffer's size against `Config.websocket_max_message_size`
(`ServeSettings.ws_max_message`) after the fact:

* it agrees to permessage-deflate with any client that offers it, and wsproto
  inflates each read of the socket (64 KiB) in one call, with no limit: one
  204 KB frame grew the embedded platform by 250 to 315 MB before the check;
* once a message passes the cap it sends its 1009 close and waits for the
  client's, writing whatever the client goes on sending into the buffer, never
  cleared: a 100 MB frame cost 100 MB.

`CappedWSStream` is that stream with three changes:

* **no extension is negotiated**: the request's `Sec-WebSocket-Extensions`
  offer is taken out before hypercorn reads it. A server may always decline an
  offer (RFC 7692 §5), and every client of these servers copes (band-sdk's
  `websockets`, trio-websocket, browsers). Compression buys nothing on the
  loopback these servers listen on, and costs a zlib context per socket and a
  bomb to defend. A frame compressed anyway (RSV1) is a protocol error, 1002;
* **a message is counted before a piece of it is kept** (its bytes on the wire:
  UTF-8 for text), so a message being read holds at most the cap plus one read
  of the socket. The first piece past the cap is answered 1009 and the
  connection is closed at once, as hypercorn closes after the app's own close:
  nothing more is read, so nothing more is held;
* **a frame wsproto cannot parse** (bad UTF-8, a reserved bit, a fragmented
  control frame) is answered with its close code before the connection is
  closed; hypercorn dropped the connection without a close frame.

`install` points hypercorn's HTTP/1.1 and HTTP/2 protocols, which build each
websocket's stream by that module-level name, at `CappedWSStream`; `serve`
calls it, so every server of the seam has it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from hypercorn.protocol import h2, h11
from hypercorn.protocol.events import Event, Request, StreamClosed
from hypercorn.protocol.ws_stream import WSStream
from wsproto.connection import ConnectionState
from wsproto.events import CloseConnection, Message, Ping
from wsproto.frame_protocol import CloseReason

__all__ = ["CappedWSStream", "install"]

_OFFER = b"sec-websocket-extensions"


class _Message:
    """The message being read: its pieces, kept only while their sum fits the cap."""

    __slots__ = ("cap", "pieces", "size")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.pieces: list[bytes | str] = []
        self.size = 0

    def add(self, piece: bytes | str) -> bool:
        """Keep `piece`, unless the message would then pass the cap (False)."""
        size = len(piece.encode()) if isinstance(piece, str) else len(piece)
        if self.size + size > self.cap:
            return False
        self.size += size
        self.pieces.append(piece)
        return True

    def take(self, text: bool) -> dict[str, Any]:
        """The whole message as the app receives it; the next one starts empty."""
        pieces, self.pieces, self.size = self.pieces, [], 0
        if text:
            return {
                "type": "websocket.receive",
                "bytes": None,
                "text": "".join(cast(list[str], pieces)),
            }
        return {
            "type": "websocket.receive",
            "bytes": b"".join(cast(list[bytes], pieces)),
            "text": None,
        }


class CappedWSStream(WSStream):
    """hypercorn's `WSStream`, offering no extension and counting a message as it is
    read (the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._message = _Message(self.config.websocket_max_message_size)

    async def handle(self, event: Event) -> None:
        if isinstance(event, Request):
            headers = [(name, value) for name, value in event.headers if name.lower() != _OFFER]
            event = dataclasses.replace(event, headers=headers)
        await super().handle(event)

    async def _handle_events(self) -> None:
        for event in self.connection.events():
            if isinstance(event, Message):
                if not self._message.add(event.data):
                    await self._fail(CloseReason.MESSAGE_TOO_BIG)
                    return
                if event.message_finished:
                    assert self.app_put is not None  # set before the accept
                    await self.app_put(self._message.take(isinstance(event.data, str)))
            elif isinstance(event, Ping):
                await self._send_wsproto_event(event.response())
            elif isinstance(event, CloseConnection):
                if self.connection.state is ConnectionState.OPEN:
                    await self._fail(event.code)  # wsproto could not parse a frame
                    return
                if self.connection.state is ConnectionState.REMOTE_CLOSING:
                    await self._send_wsproto_event(event.response())
                await self.send(StreamClosed(stream_id=self.stream_id))

    async def _fail(self, code: int) -> None:
        """Say why with a close frame, then close: whatever else the client sends is
        not read."""
        await self._send_wsproto_event(CloseConnection(code=code))
        await self.send(StreamClosed(stream_id=self.stream_id))


def install() -> None:
    """Have hypercorn build `CappedWSStream` for every websocket, over HTTP/1.1 and
    HTTP/2 alike (idempotent; hypercorn is pinned, so the names are known)."""
    for protocol in (h11, h2):
        vars(protocol)["WSStream"] = CappedWSStream
