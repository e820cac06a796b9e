"""The JSON-RPC framings, without a loop: the Copilot CLI's (`Content-Length` headers)
and ACP's (one message a line)."""

from __future__ import annotations

import pytest

from band_trio.adapters._rpc_codecs import (
    MAX_HEADER,
    ContentLengthCodec,
    FramingError,
    LineCodec,
)

encode = ContentLengthCodec.encode


def test_messages_come_out_whole_however_the_pipe_cuts_them() -> None:
    sent = [{"jsonrpc": "2.0", "id": i, "result": {"text": "é" * i}} for i in range(5)]
    stream = b"".join(encode(m) for m in sent)
    for size in (1, 2, 7, len(stream)):
        decoder = ContentLengthCodec(max_frame=1024)
        got = []
        for start in range(0, len(stream), size):
            got += decoder.feed(stream[start : start + size])
        assert got == sent


def test_an_oversized_message_is_skipped_without_being_held_and_the_next_one_is_read() -> None:
    decoder = ContentLengthCodec(max_frame=100)
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
    decoder = ContentLengthCodec(max_frame=100)
    frame = b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
    assert decoder.feed(frame + encode({"id": 2})) == [{"id": 2}]
    assert decoder.malformed == 1


def test_other_headers_and_any_case_are_accepted() -> None:
    body = b'{"id": 3}'
    frame = b"content-type: application/json\r\nCONTENT-LENGTH: %d\r\n\r\n%b" % (len(body), body)
    assert ContentLengthCodec(max_frame=100).feed(frame) == [{"id": 3}]


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
        ContentLengthCodec(max_frame=100).feed(stream)


# -- ACP: one message a line -----------------------------------------------------------


def test_lines_come_out_whole_however_the_pipe_cuts_them() -> None:
    sent = [{"jsonrpc": "2.0", "id": i, "result": {"text": "é\n" * i}} for i in range(5)]
    stream = b"".join(LineCodec.encode(m) for m in sent)
    assert stream.count(b"\n") == len(sent)  # a newline inside a string is escaped
    for size in (1, 2, 7, len(stream)):
        codec = LineCodec(max_frame=1024)
        got = []
        for start in range(0, len(stream), size):
            got += codec.feed(stream[start : start + size])
        assert got == sent


def test_a_line_over_the_limit_is_thrown_away_as_it_comes_and_the_next_one_is_read() -> None:
    codec = LineCodec(max_frame=100)
    big = LineCodec.encode({"method": "session/update", "params": {"blob": "x" * 10_000}})
    after = {"jsonrpc": "2.0", "id": 1, "result": None}
    got = []
    for start in range(0, len(big), 512):
        got += codec.feed(big[start : start + 512])
        assert len(codec._buffer) <= 512  # never held
    got += codec.feed(LineCodec.encode(after))
    assert got == [after]
    assert codec.oversized == 1
    # and one that arrives whole, with the next one in the same chunk
    assert codec.feed(big + LineCodec.encode(after)) == [after]
    assert codec.oversized == 2


@pytest.mark.parametrize("line", [b"not json", b"[1, 2]", b'"text"', b"\xff\xfe", b"{"])
def test_a_line_that_is_not_a_json_object_is_dropped_and_counted(line: bytes) -> None:
    codec = LineCodec(max_frame=100)
    assert codec.feed(line + b"\n\n\r\n" + b'{"id": 2}\n') == [{"id": 2}]
    assert codec.malformed == 1  # blank lines are not counted
