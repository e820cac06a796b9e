"""Phoenix Channels serializer V2 frames: `[join_ref, ref, topic, event, payload]`.

Sans-IO: bytes or text in, `Frame` out, and back. The decoder is the first
line of defence against a misbehaving peer, so anything that is not a
well-formed frame raises `FrameError` (never a msgspec or JSON error).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Frame", "FrameError", "decode_frame", "encode_frame", "payload_or_empty"]

_EMPTY_OBJECT = msgspec.Raw(b"{}")


class FrameError(ValueError):
    """Bytes that are not a V2 frame: bad JSON, wrong shape, empty topic or event."""


class Frame(msgspec.Struct, frozen=True, gc=False):
    """One decoded frame. `payload` stays raw until its event's schema decodes it."""

    join_ref: str | None
    ref: str | None
    topic: str
    event: str
    payload: msgspec.Raw


class _WireFrame(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    join_ref: str | int | None
    ref: str | int | None
    topic: str
    event: str
    payload: msgspec.Raw


_decoder = msgspec.json.Decoder(_WireFrame)
_encoder = msgspec.json.Encoder()


def _ref(value: str | int | None) -> str | None:
    return value if value is None or isinstance(value, str) else str(value)


def decode_frame(data: str | bytes) -> Frame:
    """Decode one websocket text frame, or raise `FrameError` saying why not."""
    try:
        wire = _decoder.decode(data)
    except (msgspec.DecodeError, UnicodeEncodeError) as exc:
        # UnicodeEncodeError: a str with lone surrogates, which is not UTF-8 text at all.
        raise FrameError(str(exc)) from None
    except RecursionError:  # msgspec recurses per level of nesting, even into a Raw
        raise FrameError("JSON nested too deeply") from None
    if not wire.topic or not wire.event:
        raise FrameError("topic and event must be non-empty strings")
    payload = payload_or_empty(wire.payload)
    return Frame(_ref(wire.join_ref), _ref(wire.ref), wire.topic, wire.event, payload)


def payload_or_empty(raw: msgspec.Raw) -> msgspec.Raw:
    """The raw payload if it is a JSON object, else `{}` (the V2 client's rule)."""
    return raw if bytes(raw).lstrip()[:1] == b"{" else _EMPTY_OBJECT


def encode_frame(
    join_ref: str | None, ref: str | None, topic: str, event: str, payload: Any
) -> str:
    """Encode a frame as the text of one websocket message."""
    return _encoder.encode((join_ref, ref, topic, event, payload)).decode()
