"""Bounded reads of a peer's answer (`contract.read_body`, `check_status`, and the REST
client), against in-memory transports: a body announced too long is refused before a
byte is read, one that runs long is cut at the limit, an error answer is read only
as far as its head."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest

from band_trio import Policy, UpstreamPolicy, errors
from band_trio.contract import UpstreamFault, check_status, read_body, request_body
from band_trio.link import RestClient


class Endless(httpx2.AsyncByteStream):
    """A body that never ends; counts what was read of it."""

    def __init__(self) -> None:
        self.read = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            self.read += 65536
            yield b"x" * 65536


def serving(response: httpx2.Response) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: response))


async def test_a_body_announced_over_the_limit_is_refused_unread() -> None:
    body = Endless()
    headers = {"content-length": str(10 * 2**20)}
    async with (
        serving(httpx2.Response(200, headers=headers, stream=body)) as client,
        client.stream("GET", "http://peer/") as response,
    ):
        with pytest.raises(errors.PeerProtocolError, match="10485760 bytes, over the 1024"):
            await read_body(response, 1024)
    assert body.read == 0


async def test_an_endless_body_is_cut_at_the_limit() -> None:
    body = Endless()
    limits = UpstreamPolicy(max_body=2**20)
    async with serving(httpx2.Response(200, stream=body)) as client:
        with pytest.raises(errors.PeerProtocolError, match="ran past the 1048576-byte limit"):
            await request_body(client, "GET", "http://peer/", limits)
    assert body.read <= 2**20 + 65536


async def test_an_error_answer_is_read_only_as_far_as_its_head() -> None:
    body = Endless()
    limits = UpstreamPolicy(max_error_body=100)
    headers = {"retry-after-ms": "1500"}
    async with (
        serving(httpx2.Response(503, headers=headers, stream=body)) as client,
        client.stream("GET", "http://peer/") as response,
    ):
        with pytest.raises(UpstreamFault) as caught:
            await check_status(response, limits)
    assert body.read == 65536  # one chunk: the head
    fault = caught.value.fault
    assert (fault.status, fault.retry_after, fault.detail) == (503, 1.5, "x" * 100)


async def test_the_rest_client_refuses_an_answer_announced_over_its_limit() -> None:
    body = Endless()
    headers = {"content-length": str(2**30)}
    transport = httpx2.MockTransport(lambda r: httpx2.Response(200, headers=headers, stream=body))
    policy = Policy(max_response_body=2**20)
    async with RestClient("http://platform", "key", transport=transport, policy=policy) as rest:
        with pytest.raises(errors.PlatformProtocolError, match="1073741824 bytes"):
            await rest.me()
    assert body.read == 0


async def test_the_rest_client_cuts_an_endless_answer_at_its_limit() -> None:
    body = Endless()
    transport = httpx2.MockTransport(lambda r: httpx2.Response(200, stream=body))
    policy = Policy(max_response_body=2**20)
    async with RestClient("http://platform", "key", transport=transport, policy=policy) as rest:
        with pytest.raises(errors.PlatformProtocolError, match="max_response_body"):
            await rest.rooms()
    assert body.read <= 2**20 + 65536
