"""Every band-trio server, over raw sockets, as a hostile web page would reach it.

A page in the user's browser can send requests to 127.0.0.1 (CSRF) and, under
a name its owner re-points at 127.0.0.1 (DNS rebinding), read the answers.
The server seam (`band_trio.server.Guard`) stands in front of every server:
the embedded platform (agent REST, admin API, console, websocket), the runs
API, the bridge's health endpoint and the host. Each attack below is sent as
the browser would send it, byte for byte, to each of them.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import pytest
import trio

from band_trio.adapters import DemoAdapter
from band_trio.bridge import Bridge, BridgeConfig, BridgePolicy, HttpTargetConfig, IdentityConfig
from band_trio.host import HostApp, serve_host
from band_trio.platform import Platform, open_platform
from band_trio.policy import PlatformPolicy, ServerPolicy
from band_trio.runs import open_runs_api

DEADLINE = 10
KEY = "runs-key-0123456789abcdef"
TOKEN = "host-token-0123456789abcdef"


@dataclass
class Server:
    """One server under attack: where, a read and a write it serves, what must never
    leak out of a refused request."""

    name: str
    port: int
    read: str
    """A GET path it answers 200 to a well-behaved client."""
    write: str
    """A POST path that changes (or would change) something."""
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    """What a legitimate client adds (its key, its token)."""
    secrets: tuple[str, ...] = ()
    refused_ok: Callable[[], int] | None = None


async def request(
    port: int,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes = b"",
) -> tuple[int, dict[str, str], bytes]:
    """One request as raw bytes, exactly these headers; (status, headers, body)."""
    lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    if body or method == "POST":
        lines.append(f"content-length: {len(body)}")
    if not any(name == "connection" for name, _ in headers):
        lines.append("connection: close")
    raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
    with trio.fail_after(DEADLINE):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(raw)
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = await stream.receive_some()
                assert chunk, answer
                answer += chunk
            head, _, rest = answer.partition(b"\r\n\r\n")
            status_line, *header_lines = head.decode("latin-1").split("\r\n")
            got = {}
            for line in header_lines:
                name, _, value = line.partition(":")
                got[name.strip().lower()] = value.strip()
            status = int(status_line.split()[1])
            if status != 101 and "text/event-stream" not in got.get("content-type", ""):
                while chunk := await stream.receive_some():
                    rest += chunk
    return status, got, rest


@asynccontextmanager
async def platform_server(console: bool = True) -> AsyncIterator[tuple[Platform, int]]:
    async with open_platform(seed=True, console=console) as platform:
        yield platform, int(platform.info.rest_url.rsplit(":", 1)[1])


@asynccontextmanager
async def the_platform() -> AsyncIterator[Server]:
    async with platform_server() as (platform, port):
        info = platform.info
        assert info.api_key and info.agent_id
        yield Server(
            "platform",
            port,
            read="/_admin/info",
            write="/_admin/rooms",
            body=b'{"title": "made by an attacker"}',
            secrets=(info.api_key,),
        )


@asynccontextmanager
async def the_agent_api() -> AsyncIterator[Server]:
    async with platform_server() as (platform, port):
        info = platform.info
        assert info.api_key
        yield Server(
            "agent REST",
            port,
            read="/api/v1/agent/me",
            write=f"/api/v1/agent/chats/{info.room_id}/messages",
            body=b'{"message": {"content": "attacker"}}',
            headers={"x-api-key": info.api_key},
            secrets=(info.api_key,),
        )


@asynccontextmanager
async def the_console() -> AsyncIterator[Server]:
    async with platform_server() as (platform, port):
        info = platform.info
        assert info.api_key and info.agent_id
        yield Server(
            "console",
            port,
            read="/_console/",
            write="/_console/api/control",
            body=b'{"mode": "stop", "agent_id": "%s"}' % info.agent_id.encode(),
            secrets=(info.api_key,),
        )


@asynccontextmanager
async def the_runs_api() -> AsyncIterator[Server]:
    async with open_runs_api(DemoAdapter(), api_key=KEY) as api:
        yield Server(
            "runs API",
            int(api.url.rsplit(":", 1)[1]),
            read="/health",
            write="/v1/runs",
            body=b'{"input": "hi"}',
            headers={"authorization": f"Bearer {KEY}"},
            secrets=(KEY,),
        )


@asynccontextmanager
async def the_bridge_health() -> AsyncIterator[Server]:
    async with platform_server(console=False) as (platform, _):
        info = platform.info
        assert info.agent_id and info.api_key
        identity = IdentityConfig(
            name="a",
            agent_id=info.agent_id,
            api_key=info.api_key,
            rest_url=info.rest_url,
            ws_url=info.ws_url,
            target=HttpTargetConfig(url="http://127.0.0.1:9/"),
        )
        bridge = Bridge(BridgeConfig((identity,), health=("127.0.0.1", 0)))
        async with trio.open_nursery() as nursery:
            await nursery.start(bridge.run)
            with trio.fail_after(DEADLINE):
                await bridge.wait_until(lambda: bridge.healthy)
            try:
                yield Server(
                    "bridge health",
                    bridge.health_port or 0,
                    read="/health",
                    write="/health",
                    secrets=(info.api_key,),
                )
            finally:
                bridge.close()


@asynccontextmanager
async def serving_host(
    platform: Platform, bridge_policy: BridgePolicy | None = None
) -> AsyncIterator[tuple[HostApp, int]]:
    """`band-trio host`'s server for the platform's seeded agent; (app, port)."""
    info = platform.info
    assert info.agent_id and info.api_key
    app = HostApp(DemoAdapter(), agent_id=info.agent_id, token=TOKEN, bridge_policy=bridge_policy)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        port = await nursery.start(
            functools.partial(
                serve_host,
                app,
                api_key=info.api_key,
                rest_url=info.rest_url,
                host="127.0.0.1",
                port=0,
                stop=stop,
            )
        )
        try:
            yield app, port
        finally:
            stop.set()


@asynccontextmanager
async def the_host() -> AsyncIterator[Server]:
    async with platform_server(console=False) as (platform, _):
        info = platform.info
        assert info.agent_id and info.api_key
        async with serving_host(platform) as (_, port):
            yield Server(
                "host",
                port,
                read="/health",
                write="/",
                body=b'{"event_type": "room_added", "agent_id": "%s", "room_id": null, '
                b'"payload": {}, "forwarded_at": "x"}' % info.agent_id.encode(),
                headers={"authorization": f"Bearer {TOKEN}"},
                secrets=(info.api_key, TOKEN, info.agent_id),
            )


SERVERS: dict[str, Callable[[], AbstractAsyncContextManager[Server]]] = {
    "platform-admin": the_platform,
    "platform-agent-rest": the_agent_api,
    "platform-console": the_console,
    "runs-api": the_runs_api,
    "bridge-health": the_bridge_health,
    "host": the_host,
}


@pytest.fixture(params=sorted(SERVERS))
async def server(request: pytest.FixtureRequest) -> AsyncIterator[Server]:
    async with SERVERS[request.param]() as running:
        yield running


def _host(server: Server) -> tuple[str, str]:
    return ("host", f"127.0.0.1:{server.port}")


def _leaks(server: Server, body: bytes) -> list[str]:
    return [secret for secret in server.secrets if secret.encode() in body]


async def test_a_well_behaved_client_is_served(server: Server) -> None:
    headers = [_host(server), *server.headers.items()]
    status, answer, _ = await request(server.port, "GET", server.read, headers)
    assert status == 200, server.name
    assert answer["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in answer["content-security-policy"]
    assert answer["x-content-type-options"] == "nosniff"
    # a same-origin page (Origin is this very server) is a well-behaved client too
    same = [*headers, ("origin", f"http://127.0.0.1:{server.port}")]
    status, _, _ = await request(server.port, "GET", server.read, same)
    assert status == 200, server.name


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example:{port}",  # DNS rebinding: the page's own name
        "attacker.example",
        "127.0.0.1",  # no port: not this server's origin
        "127.0.0.1:1",
        "localhost.attacker.example:{port}",
        "127.0.0.1:{port}.attacker.example",
    ],
)
async def test_a_foreign_host_name_is_421_and_reveals_nothing(server: Server, host: str) -> None:
    headers = [("host", host.format(port=server.port)), *server.headers.items()]
    for method, path, body in (
        ("GET", server.read, b""),
        ("POST", server.write, server.body),
    ):
        extra = [("content-type", "application/json")] if method == "POST" else []
        status, answer, text = await request(server.port, method, path, [*headers, *extra], body)
        assert status == 421, (server.name, method, path, text)
        assert _leaks(server, text) == [], server.name
        assert answer["connection"] == "close"


async def test_loopback_names_with_the_port_are_this_server(server: Server) -> None:
    for name in ("localhost", "LOCALHOST", "[::1]", "127.0.0.1"):
        headers = [("host", f"{name}:{server.port}"), *server.headers.items()]
        status, _, _ = await request(server.port, "GET", server.read, headers)
        assert status == 200, (server.name, name)


async def test_two_host_headers_are_refused(server: Server) -> None:
    headers = [_host(server), ("host", "attacker.example"), *server.headers.items()]
    status, _, text = await request(server.port, "GET", server.read, headers)
    assert status in (400, 421), server.name
    assert _leaks(server, text) == []


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1:1"])
async def test_another_origin_is_403_on_reads_and_writes(server: Server, origin: str) -> None:
    headers = [_host(server), ("origin", origin), *server.headers.items()]
    read, _, text = await request(server.port, "GET", server.read, headers)
    json = [*headers, ("content-type", "application/json")]
    write, _, written = await request(server.port, "POST", server.write, json, server.body)
    assert (read, write) == (403, 403), server.name
    assert _leaks(server, text + written) == []


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
async def test_a_body_that_is_not_json_is_415_unread(
    server: Server, content_type: str | None
) -> None:
    """The content types a cross-origin form (or `fetch` without a preflight) can
    send; none of them is JSON. No Origin here: some browsers omit it."""
    headers = [_host(server), *server.headers.items()]
    if content_type is not None:
        headers.append(("content-type", content_type))
    status, _, text = await request(server.port, "POST", server.write, headers, server.body)
    assert status == 415, (server.name, text)
    assert _leaks(server, text) == []


async def test_a_websocket_upgrade_from_a_hostile_page_is_refused() -> None:
    """Cross-site websocket hijacking and rebinding, on the platform's agent socket."""
    async with platform_server() as (platform, port):
        info = platform.info
        path = f"/api/v1/socket/websocket?vsn=2.0.0&agent_id={info.agent_id}"
        upgrade = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-version", "13"),
            ("x-api-key", info.api_key or ""),
        ]
        for attack in (
            [("host", f"attacker.example:{port}")],
            [("host", f"127.0.0.1:{port}"), ("origin", "http://evil.example")],
        ):
            status, _, text = await request(port, "GET", path, [*attack, *upgrade])
            assert status in (403, 421), text
        assert platform.connected_agents() == set()
        status, _, _ = await request(port, "GET", path, [("host", f"127.0.0.1:{port}"), *upgrade])
        assert status == 101  # an agent, which sends no Origin, is served
        assert platform.listening is not None
        assert platform.stats["refused_misdirected_request"] >= 1
        assert platform.stats["refused_forbidden_origin"] >= 1


async def test_a_body_that_trickles_is_408_and_its_handler_freed() -> None:
    """Headers, then part of the body, then nothing: the request is answered 408 once
    `ServerPolicy.body_read` has passed, on the platform and on the host, and the
    server goes on serving."""
    quick = ServerPolicy(body_read=0.2)
    async with (
        open_platform(seed=True, policy=PlatformPolicy(server=quick)) as platform,
        serving_host(platform, BridgePolicy(server=quick)) as (app, host_port),
    ):
        platform_port = int(platform.info.rest_url.rsplit(":", 1)[1])
        for port, path, extra in (
            (platform_port, "/_admin/rooms", ""),
            (host_port, "/", f"authorization: Bearer {TOKEN}\r\n"),
        ):
            with trio.fail_after(DEADLINE):
                async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
                    await stream.send_all(
                        f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{extra}"
                        "content-type: application/json\r\ncontent-length: 100\r\n\r\n"
                        '{"title": '.encode()
                    )  # ...and the other 90 bytes never come
                    answer = b""
                    while chunk := await stream.receive_some():
                        answer += chunk
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"request_timeout" in answer
            status, _, _ = await request(
                port,
                "GET",
                "/health" if extra else "/_admin/stats",
                [("host", f"127.0.0.1:{port}")],
            )
            assert status == 200
        assert platform.stats["refused_request_timeout"] == 1
        assert app.outcomes == {}
