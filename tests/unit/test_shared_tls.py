"""Every HTTP client band-trio builds shares one TLS context, built once, lazily.

A client built without one makes its own and loads the CA bundle into it (tens of
milliseconds and most of a megabyte each): a bridge of a thousand identities spent
most of its start-up and most of its memory there (docs/benchmarks.md)."""

from __future__ import annotations

import ssl
import threading
from contextlib import AsyncExitStack

import pytest
import trio

from band_trio import tls
from band_trio.adapters import A2AAdapter, OpenCodeAdapter
from band_trio.bridge import HttpTargetConfig
from band_trio.bridge._policy import BridgePolicy
from band_trio.bridge._targets import TargetClients, open_target
from band_trio.contract import upstream_client
from band_trio.link import RestClient
from band_trio.policy import UpstreamPolicy


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[ssl.SSLContext]:
    """Every `ssl.SSLContext` built while the test runs, from a fresh (unbuilt) cache."""
    monkeypatch.setattr(tls, "_context", None)
    contexts: list[ssl.SSLContext] = []
    original = ssl.SSLContext.__new__

    def counting(cls: type[ssl.SSLContext], *args: object, **kwargs: object) -> ssl.SSLContext:
        context = original(cls, *args, **kwargs)
        contexts.append(context)
        return context

    monkeypatch.setattr(ssl.SSLContext, "__new__", counting)
    return contexts


def test_nothing_is_built_until_a_client_asks(built: list[ssl.SSLContext]) -> None:
    assert tls._context is None
    assert built == []


async def test_rest_clients_and_http_targets_share_one_context_built_once(
    built: list[ssl.SSLContext],
) -> None:
    async with AsyncExitStack() as stack:
        clients = TargetClients(BridgePolicy(), stack)
        for index in range(10):
            await stack.enter_async_context(RestClient("http://127.0.0.1:9", f"key-{index}"))
            await open_target(
                HttpTargetConfig(url=f"http://127.0.0.1:{9000 + index}/"), BridgePolicy(), clients
            )
        assert len(clients) == 10  # ten origins: ten clients, one context
    assert len(built) == 1
    assert built[0] is tls.shared_ssl_context()


async def test_the_reference_adapters_clients_share_it_too(built: list[ssl.SSLContext]) -> None:
    upstream = UpstreamPolicy()
    adapters = [
        A2AAdapter("http://127.0.0.1:9/"),
        A2AAdapter("http://127.0.0.1:9/other"),
        OpenCodeAdapter("http://127.0.0.1:9/", provider_id="p", model_id="m"),
    ]
    for adapter in adapters:
        async with adapter._client(upstream):
            pass
    async with upstream_client(upstream):  # the OpenAI adapter's client, per turn
        pass
    assert len(built) == 1


def test_threads_racing_for_the_first_context_get_the_same_one(
    built: list[ssl.SSLContext],
) -> None:
    got: list[ssl.SSLContext] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        got.append(tls.shared_ssl_context())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1
    assert all(context is built[0] for context in got)


async def test_a_bridge_of_many_identities_builds_one_context(
    built: list[ssl.SSLContext],
) -> None:
    """The whole bridge, on the embedded platform: 20 identities, one context."""
    from band_trio.platform import open_platform
    from bridge._helpers import identity as identity_for
    from bridge._helpers import running_bridge, second_agent

    async with open_platform(seed=True) as platform:
        agents = [second_agent(platform, f"room {index}") for index in range(20)]
        identities = [
            identity_for(platform, "http://127.0.0.1:9/", agent_id=agent, api_key=key)
            for agent, key, _room in agents
        ]
        async with running_bridge(identities):
            await trio.lowlevel.checkpoint()
    assert len(built) == 1
