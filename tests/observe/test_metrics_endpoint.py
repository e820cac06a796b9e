"""`/metrics` is a band-trio server like the others (the server seam): loopback unless
asked, a Host allow-list, other origins refused, no framing, read-only; and its flags
are checked before anything starts, each refusal one line with exit 2."""

from __future__ import annotations

import gc
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

import httpx2
import pytest
import trio

from band_trio import errors, observe
from band_trio.cli import EXIT_CONFIG, main
from band_trio.server import Listening

DEADLINE = 10
SETTINGS = {
    "BAND_AGENT_ID": "agent",
    "BAND_API_KEY": "key",
    "BAND_REST_URL": "http://127.0.0.1:9",
    "BAND_WS_URL": "ws://127.0.0.1:9/api/v1/socket/websocket",
}


@asynccontextmanager
async def endpoint(registry: observe.Registry) -> AsyncIterator[Listening]:
    stop = trio.Event()
    serving = partial(observe.serve_metrics, "127.0.0.1", 0, registry=registry, stop=stop)
    async with trio.open_nursery() as nursery:
        listening: Listening = await nursery.start(serving)
        try:
            yield listening
        finally:
            stop.set()


def small_registry() -> observe.Registry:
    registry = observe.Registry()
    counter = observe.Counter("demo_events_total", "Events.", {"kind": ("a", "b")})
    registry.register(counter)
    counter.inc("a")
    return registry


async def test_a_scrape_is_prometheus_text_with_the_servers_framing_headers() -> None:
    with trio.fail_after(DEADLINE):
        async with endpoint(small_registry()) as listening, httpx2.AsyncClient() as client:
            got = await client.get(f"{listening.url}/metrics")
            head = await client.head(f"{listening.url}/metrics")
    assert got.status_code == 200
    assert got.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert got.headers["cache-control"] == "no-store"
    assert got.headers["x-frame-options"] == "DENY"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert 'demo_events_total{kind="a"} 1\n' in got.text
    assert 'demo_events_total{kind="b"} 0\n' in got.text
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(got.content))


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "expected"),
    [
        ("GET", "/metrics", {"host": "evil.example:80"}, None, 421),  # DNS rebinding
        ("GET", "/metrics", {"origin": "http://evil.example"}, None, 403),  # another page
        ("POST", "/metrics", {"content-type": "text/plain"}, b"x", 415),  # a form
        ("POST", "/metrics", {"content-type": "application/json"}, b"{}", 405),  # read-only
        ("DELETE", "/metrics", {}, None, 405),
        ("GET", "/", {}, None, 404),
        ("GET", "/metrics/../admin", {}, None, 404),
    ],
)
async def test_a_hostile_request_gets_nothing(
    method: str, path: str, headers: dict[str, str], body: bytes | None, expected: int
) -> None:
    with trio.fail_after(DEADLINE):
        async with endpoint(small_registry()) as listening, httpx2.AsyncClient() as client:
            answer = await client.request(
                method, f"{listening.url}{path}", headers=headers, content=body
            )
    assert answer.status_code == expected
    assert b"demo_events_total" not in answer.content


async def test_a_non_loopback_bind_needs_the_opt_in() -> None:
    with pytest.raises(errors.ConfigurationError, match="--metrics-allow-remote"):
        await observe.serve_metrics("0.0.0.0", 0)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--metrics", "0.0.0.0:9464"], "give --metrics-allow-remote to mean it"),
        (["--metrics", "9464"], "--metrics (BAND_METRICS) must be HOST:PORT"),
        (["--metrics", "127.0.0.1:99999"], "must be HOST:PORT"),
        (["--traces", "jaeger"], "--traces (BAND_TRACES) is console or otlp, not 'jaeger'"),
    ],
)
@pytest.mark.parametrize("command", ["agent", "bridge", "host", "runs-api"])
def test_a_bad_flag_is_one_line_and_exit_2(
    command: str,
    argv: list[str],
    words: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SETTINGS.items():
        monkeypatch.setenv(name, value)
    needed = {"bridge": ["--config", "/nonexistent.toml"], "host": ["--adapter", "x:y"]}
    assert main([command, *needed.get(command, []), *argv]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_a_port_in_use_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SETTINGS.items():
        monkeypatch.setenv(name, value)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["agent", "--metrics", f"127.0.0.1:{port}"]) == EXIT_CONFIG
    gc.collect()  # a socket the failed bind left open would be reported (and fail) here
    err = capsys.readouterr().err
    assert err == f"band-trio: cannot listen on 127.0.0.1:{port}: Address already in use\n"
