"""The Copilot CLI's JSON-RPC framing (`Content-Length` headers), without a loop."""

from __future__ import annotations

import pytest

from band_trio.adapters._copilot_wire import (
    MAX_HEADER,
    FrameDecoder,
    FramingError,
    encode,
)


def test_messages_come_out_whole_however_the_pipe_cuts_them() -> None:
    sent = [{"jsonrpc": "2.0", "id": i, "result": {"text": "é" * i}} for i in range(5)]
    stream = b"".join(encode(m) for m in sent)
    for size in (1, 2, 7, len(stream)):
        decoder = FrameDecoder(max_frame=1024)
        got = []
        for start in range(0, len(stream), size):
            got += decoder.feed(stream[start : start + size])
        assert got == sent


def test_an_oversized_message_is_skipped_without_being_held_and_the_next_one_is_read() -> None:
    decoder = FrameDecoder(max_frame=100)
    big = encode({"method": "session.event", "params": {"blob": "x" * 10_000}})
    after = {"jsonrpc": "2.0", "id": 1, "result": True}
    got = []
    for start in range(0, len(big), 512):
        got += decoder.feed(big[start : start + 512])
        assert len(decoder._buffer) <= 512  # thrown away as it comes
    got += decoder.feed(encode(after))
    assert got == [after]
    assert decoder.oversized == 1


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_dropped_and_counted(body: bytes) -> None:
    decoder = FrameDecoder(max_frame=100)
    frame = b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    assert decoder.feed(frame + encode({"id": 2})) == [{"id": 2}]
    assert decoder.malformed == 1


def test_other_headers_and_any_case_are_accepted() -> None:
    body = b'{"id": 3}'
    frame = b"content-type: application/json\r\nCONTENT-LENGTH: %d\r\n\r\n%b" % (len(body), body)
    assert FrameDecoder(max_frame=100).feed(frame) == [{"id": 3}]


@pytest.mark.parametrize(
    ("stream", "error"),
    [
        (b"Content-Type: x\r\n\r\n{}", "without Content-Length"),
        (b"Content-Length: -4\r\n\r\n", "bad Content-Length"),
        (b"Content-Length: 12x\r\n\r\n", "bad Content-Length"),
        (b"hello there\r\n\r\n", "not a header line"),
        (b"Content-Length: 99999999999999\r\n\r\n", "implausible"),
        (b"X" * (MAX_HEADER + 1), "no end of header"),
    ],
)
def test_a_stream_that_lost_its_framing_is_an_error(stream: bytes, error: str) -> None:
    with pytest.raises(FramingError, match=error):
        FrameDecoder(max_frame=100).feed(stream)
