"""JSON-RPC framings over a byte stream, sans-IO: bytes in, messages out. One codec
per protocol that `_jsonrpc.JsonRpcPeer` speaks:

* `ContentLengthCodec` — the Copilot CLI (`copilot --headless --stdio`) frames
  the way the Language Server Protocol does: a header block, `Content-Length: N`
  and an empty line (`\\r\\n\\r\\n`), then exactly N bytes of UTF-8 JSON;
* `LineCodec` — the Agent Client Protocol's stdio transport: one JSON message a
  line, delimited by `\\n`, with no newline inside a message.

No trio here: a codec is fed what the pipe gave and returns whole messages, so it
is tested without a loop. A peer can send anything, so:

* a message larger than `max_frame` is skipped as it arrives — never held — and
  counted (`oversized`): the Copilot CLI sends a snapshot of the whole
  conversation after each turn, which nothing here needs; a line over the limit
  is thrown away up to its newline;
* a message that is not a JSON object (invalid JSON, invalid UTF-8, a list) is
  dropped and counted (`malformed`): the next one is read as usual;
* only a Content-Length stream can lose its framing (a header block longer than
  `MAX_HEADER`, or one without a usable `Content-Length`): that is a
  `FramingError`, and the caller ends the connection. A line stream finds its
  framing again at the next newline.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "MAX_BODY",
    "MAX_HEADER",
    "ContentLengthCodec",
    "FramingError",
    "LineCodec",
]

MAX_HEADER = 1024
"""Bytes of one header block at most (the CLI sends one 20-odd-byte line)."""

MAX_BODY = 1 << 30
"""A Content-Length past this is not a message being skipped but a broken stream."""

_END = b"\r\n\r\n"
_json = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


class FramingError(Exception):
    """The byte stream is not framed as the protocol says: it cannot be read on."""


def _decode(body: bytes | bytearray) -> dict[str, Any] | None:
    try:
        message = _json.decode(body)
    except msgspec.DecodeError:
        return None
    return message if isinstance(message, dict) else None


class ContentLengthCodec:
    """The Copilot CLI's framing: `Content-Length` headers, then the body."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.oversized = 0
        """Messages skipped for being larger than `max_frame`."""
        self.malformed = 0
        """Messages dropped for not being a JSON object."""
        self._buffer = bytearray()
        self._body: int | None = None
        """Bytes of the body being read, once its header was parsed."""
        self._skip = 0
        """Bytes of an oversized body still to throw away."""

    @staticmethod
    def encode(message: dict[str, Any]) -> bytes:
        """One framed message, ready to write."""
        body = _encoder.encode(message)
        return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)

    def feed(self, data: bytes | bytearray) -> list[dict[str, Any]]:
        """The messages completed by `data`, in order; raises `FramingError`."""
        messages: list[dict[str, Any]] = []
        buffer = self._buffer
        buffer += data
        while True:
            if self._skip:  # the rest of an oversized body is still to come
                dropped = min(self._skip, len(buffer))
                del buffer[:dropped]
                self._skip -= dropped
                if self._skip:
                    return messages
            if self._body is None:
                end = buffer.find(_END, 0, MAX_HEADER + len(_END))
                if end < 0:
                    if len(buffer) > MAX_HEADER:
                        raise FramingError(f"no end of header within {MAX_HEADER} bytes")
                    return messages
                length = _content_length(bytes(buffer[:end]))
                if length > MAX_BODY:
                    raise FramingError(f"an implausible Content-Length: {length}")
                del buffer[: end + len(_END)]
                if length > self.max_frame:
                    self.oversized += 1
                    self._skip = length
                    continue
                self._body = length
            if len(buffer) < self._body:
                return messages
            message = _decode(buffer[: self._body])
            del buffer[: self._body]
            self._body = None
            if message is not None:
                messages.append(message)
            else:
                self.malformed += 1


def _content_length(header: bytes) -> int:
    length: int | None = None
    for line in header.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if not sep:
            raise FramingError(f"not a header line: {line[:80]!r}")
        if name.strip().lower() == b"content-length":
            text = value.strip()
            if not text.isdigit():
                raise FramingError(f"bad Content-Length: {text[:40]!r}")
            length = int(text)
    if length is None:
        raise FramingError(f"a header without Content-Length: {header[:80]!r}")
    return length


class LineCodec:
    """ACP's stdio framing: one JSON message a line. Never raises `FramingError`."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.oversized = 0
        """Lines skipped for being longer than `max_frame`."""
        self.malformed = 0
        """Lines dropped for not being a JSON object (blank lines are not counted)."""
        self._buffer = bytearray()
        self._skipping = False
        """Inside a line over the limit: thrown away up to its newline."""

    @staticmethod
    def encode(message: dict[str, Any]) -> bytes:
        """One message as a line (JSON never holds a raw newline: msgspec escapes it)."""
        return _encoder.encode(message) + b"\n"

    def feed(self, data: bytes | bytearray) -> list[dict[str, Any]]:
        """The messages completed by `data`, in order."""
        messages: list[dict[str, Any]] = []
        buffer = self._buffer
        buffer += data
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            if self._skipping:  # the end of a line that was too long
                self._skipping = False
            elif end - start > self.max_frame:
                self.oversized += 1
            else:
                line = buffer[start:end].strip()
                if line:
                    message = _decode(line)
                    if message is not None:
                        messages.append(message)
                    else:
                        self.malformed += 1
            start = end + 1
        del buffer[:start]
        if len(buffer) > self.max_frame:  # a line too long to hold: thrown away as it comes
            if not self._skipping:
                self.oversized += 1
            self._skipping = True
            buffer.clear()
        return messages
