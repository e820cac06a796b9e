"""RestClient's retry rules, against an in-memory transport (a unit test of one piece)."""

from __future__ import annotations

import email.utils
import itertools
import time

import httpx2
import pytest
import trio

from band_trio import Policy, errors
from band_trio.link import RestClient

NEXT = "/api/v1/agent/chats/R/messages/next"


def scripted(*responses: httpx2.Response) -> tuple[httpx2.MockTransport, list[float]]:
    queue = list(responses)
    times: list[float] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.headers["x-api-key"] == "key"
        times.append(trio.current_time())
        return queue.pop(0)

    return httpx2.MockTransport(handler), times


async def test_429_waits_for_retry_after_then_succeeds(autojump_clock: object) -> None:
    transport, times = scripted(
        httpx2.Response(429, headers={"Retry-After": "7"}), httpx2.Response(204)
    )
    async with RestClient("http://platform", "key", transport=transport) as rest:
        assert await rest.next_message("R") is None
    assert len(times) == 2
    assert times[1] - times[0] == pytest.approx(7, abs=0.01)


async def test_a_retry_after_past_the_cap_is_not_waited_for(autojump_clock: object) -> None:
    """A platform that asks for an hour is not asked again after the cap (that would come
    before its Retry-After): the call fails at once with its error, which says when."""
    transport, times = scripted(
        httpx2.Response(503, headers={"Retry-After": "3600"}), httpx2.Response(204)
    )
    policy = Policy(rest_retry_cap=5)
    async with RestClient("http://platform", "key", transport=transport, policy=policy) as rest:
        with pytest.raises(errors.PlatformResponseError) as caught:
            await rest.next_message("R")
    assert len(times) == 1
    assert caught.value.retry_after == 3600


async def test_retry_after_ms_and_an_http_date_are_honoured(autojump_clock: object) -> None:
    later = email.utils.formatdate(time.time() + 9, usegmt=True)
    transport, times = scripted(
        httpx2.Response(429, headers={"retry-after-ms": "250"}),
        httpx2.Response(503, headers={"Retry-After": later}),
        httpx2.Response(204),
    )
    async with RestClient("http://platform", "key", transport=transport) as rest:
        assert await rest.next_message("R") is None
    assert times[1] - times[0] == pytest.approx(0.25, abs=0.01)
    assert times[2] - times[1] == pytest.approx(9, abs=1.1)


async def test_retries_are_bounded_and_end_in_the_typed_error(autojump_clock: object) -> None:
    transport, times = scripted(*[httpx2.Response(429) for _ in range(4)])
    async with RestClient("http://platform", "key", transport=transport) as rest:
        with pytest.raises(errors.RateLimitedError):
            await rest.next_message("R")
    assert len(times) == 4  # the first try and three retries


async def test_401_is_not_retried(autojump_clock: object) -> None:
    body = b'{"error":{"code":"unauthorized","message":"bad key","request_id":"r"}}'
    transport, times = scripted(httpx2.Response(401, content=body))
    async with RestClient("http://platform", "key", transport=transport) as rest:
        with pytest.raises(errors.AuthenticationError, match="bad key"):
            await rest.me()
    assert len(times) == 1


async def test_transport_errors_surface_as_platform_unavailable(autojump_clock: object) -> None:
    """Each retry waits its real backoff (5 s of them): the clock jumps over the waits."""

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    async with RestClient("http://platform", "key", transport=httpx2.MockTransport(refuse)) as rest:
        with pytest.raises(errors.PlatformUnavailableError) as caught:
            await rest.next_message("R")
    assert isinstance(caught.value.__cause__, httpx2.ConnectError)


async def test_a_200_that_is_not_the_contract_is_a_protocol_error() -> None:
    transport, _ = scripted(httpx2.Response(200, content=b'{"data": {"nope": 1}}'))
    async with RestClient("http://platform", "key", transport=transport) as rest:
        with pytest.raises(errors.PlatformProtocolError):
            await rest.claim("R", "M")


async def test_lifecycle_calls_need_exactly_200() -> None:
    body = b'{"data": {"id": "M", "status": "processing", "attempt_number": 1, "success": true}}'
    transport, _ = scripted(httpx2.Response(201, content=body), httpx2.Response(204))
    async with RestClient("http://platform", "key", transport=transport) as rest:
        with pytest.raises(errors.PlatformProtocolError, match="expected 200"):
            await rest.claim("R", "M")
        assert await rest.claim("R", "M") is None  # 204: the room is stopped


def failing_then(
    first: type[httpx2.TransportError], then: httpx2.Response
) -> tuple[httpx2.MockTransport, list[str]]:
    """A transport whose first request raises `first`, the next ones answer `then`."""
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        if len(seen) == 1:
            raise first("scripted", request=request)
        return then

    return httpx2.MockTransport(handler), seen


POSTED = {"data": {"id": "M", "success": True, "recipients": []}}


async def test_a_request_that_never_left_is_retried_even_a_post(autojump_clock: object) -> None:
    transport, seen = failing_then(httpx2.ConnectError, httpx2.Response(201, json=POSTED))
    async with RestClient("http://platform", "key", transport=transport) as rest:
        posted = await rest.post_message("R", "hello", [])
    assert posted.id == "M"
    assert len(seen) == 2


async def test_a_request_cut_off_after_it_left_is_not_retried(autojump_clock: object) -> None:
    transport, seen = failing_then(httpx2.ReadError, httpx2.Response(201, json=POSTED))
    async with RestClient("http://platform", "key", transport=transport) as rest:
        with pytest.raises(errors.PlatformUnavailableError, match="ReadError"):
            await rest.post_message("R", "hello", [])
    assert len(seen) == 1  # the platform may have posted it: never twice


async def test_the_start_up_check_does_not_retry_an_unreachable_platform() -> None:
    transport, seen = failing_then(httpx2.ConnectError, httpx2.Response(200, json={}))
    async with RestClient("http://platform", "key", transport=transport) as rest:
        with pytest.raises(errors.PlatformUnavailableError, match="ConnectError"):
            await rest.me()
    assert len(seen) == 1


async def test_ids_are_one_percent_encoded_path_segment() -> None:
    paths: list[bytes] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        paths.append(request.url.raw_path)
        return httpx2.Response(204)

    async with RestClient("http://platform", "key", transport=httpx2.MockTransport(handler)) as r:
        await r.next_message("a/b?c#d%e f")
    assert paths == [b"/api/v1/agent/chats/a%2Fb%3Fc%23d%25e%20f/messages/next"]


async def test_the_platform_retries_span_at_least_half_their_schedule(
    autojump_clock: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The REST client's backoff is equal jitter: however the draws fall, its retries
    wait at least half of each doubling step, so a reply outlasts a platform restart
    of about that long (with full jitter three draws near zero spent the whole budget
    at once, and tests/integration/test_hardening.py's restart failed one run in a few)."""
    monkeypatch.setattr("band_trio.retry.random.random", lambda: 0.0)  # the unluckiest draws
    transport, times = scripted(*(httpx2.Response(503) for _ in range(4)))
    policy = Policy(rest_retry_base=0.5, rest_max_retries=3)
    async with RestClient("http://platform", "key", transport=transport, policy=policy) as rest:
        with pytest.raises(errors.PlatformResponseError):
            await rest.next_message("R")
    waits = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert waits == pytest.approx([0.25, 0.5, 1.0], abs=0.01)
