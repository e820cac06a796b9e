"""`server_sent_events`: any chunking of the body gives the same events; memory stays
bounded whatever a peer sends."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from band_trio.contract import MAX_EVENT_BYTES, ServerSentEvent, server_sent_events
from band_trio.errors import PeerProtocolError
from seed_rotation import examples


class Chunks(httpx2.AsyncByteStream):
    """A response body delivered in the given pieces, counting how many were read."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            self.read += 1
            yield piece


async def events_of(pieces: list[bytes], **options: int) -> list[ServerSentEvent]:
    response = httpx2.Response(200, stream=Chunks(pieces))
    return [event async for event in server_sent_events(response, **options)]


BODY = (
    b": keepalive\r\n"
    b"data: one\r\n\r\n"
    b'event: error\ndata: {"a":\ndata: 1}\n\n'
    b"data: \xc3\xa9t\xc3\xa9\r\r"
    b"data: last, no blank line"
)
EXPECTED = [
    ServerSentEvent("message", "one"),
    ServerSentEvent("error", '{"a":\n1}'),
    ServerSentEvent("message", "été"),
    ServerSentEvent("message", "last, no blank line"),
]


async def test_comments_names_multiline_data_and_every_line_ending() -> None:
    assert await events_of([BODY]) == EXPECTED


@settings(max_examples=examples(200), deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(BODY) - 1), unique=True))
async def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    edges = [0, *sorted(cuts), len(BODY)]
    pieces = [BODY[a:b] for a, b in itertools.pairwise(edges)]
    assert await events_of(pieces) == EXPECTED  # a \r\n cut in two is still one line end


async def test_a_line_with_no_end_is_refused_without_reading_the_rest() -> None:
    stream = Chunks([b"data: " + b"x" * 65536] * 160)  # 10 MiB, no newline
    response = httpx2.Response(200, stream=stream)
    with pytest.raises(PeerProtocolError, match="over 1048576 bytes"):
        async for _ in server_sent_events(response):
            pass
    assert stream.read <= MAX_EVENT_BYTES // 65536 + 2  # stopped at the limit


async def test_an_event_of_many_small_lines_is_bounded_too() -> None:
    with pytest.raises(PeerProtocolError, match="a server-sent event over 100 bytes"):
        await events_of([b"data: 0123456789\n" * 20 + b"\n"], max_event=100)
