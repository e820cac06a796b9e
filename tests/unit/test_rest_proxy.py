"""A proxy named by the environment is honoured: the REST client then sends through
httpx2 (which reads it) rather than its lean pool (which does not speak proxies).
Before, adopting the pool silently dropped `HTTPS_PROXY` for every agent."""

from __future__ import annotations

import functools
import json

import pytest
import trio

from band_trio.link._rest import RestClient, env_proxy_for

PROFILE = {
    "id": "a1",
    "name": "agent",
    "handle": "agent",
    "owner_uuid": "o1",
    "feature_flags": {},
    "inserted_at": "2026-01-01T00:00:00Z",
    "updated_at": "2026-01-01T00:00:00Z",
}


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def test_which_urls_the_environment_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not env_proxy_for("https://platform.example")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert env_proxy_for("https://platform.example")
    assert not env_proxy_for("http://platform.example")  # another scheme
    monkeypatch.setenv("NO_PROXY", "platform.example")
    assert not env_proxy_for("https://platform.example")
    monkeypatch.setenv("ALL_PROXY", "http://proxy.example:3128")
    assert env_proxy_for("http://elsewhere.example")


async def test_a_request_goes_through_the_proxy_the_environment_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bytes] = []

    async def proxy(stream: trio.SocketStream) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some()
            if not chunk:
                return
            head += chunk
        seen.append(head.split(b"\r\n", 1)[0])
        body = json.dumps({"data": PROFILE}).encode()
        await stream.send_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%b" % (len(body), body)
        )
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, proxy, 0, host="127.0.0.1")
        [listener] = await nursery.start(serve)
        port = listener.socket.getsockname()[1]
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        # nothing listens at the platform's address: only the proxy can answer
        async with RestClient("http://platform.invalid:9", "key-0123456789") as rest:
            with trio.fail_after(10):
                profile = await rest.me()
        nursery.cancel_scope.cancel()
    assert profile.id == "a1"
    assert seen == [b"GET http://platform.invalid:9/api/v1/agent/me HTTP/1.1"]
