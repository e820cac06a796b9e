"""Raw loopback clients for the embedded platform: httpx2 for REST, trio-websocket for WS.

No band_trio.link here on purpose: the platform is tested as the real SDK
would see it, frame by frame. (Not named `platform`: that is a stdlib module.)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
from trio_websocket import (
    ConnectionRejected,
    WebSocketConnection,
    open_websocket_url,
    wrap_client_stream,
)

from band_trio.platform import Platform

DEADLINE = 5.0


def room_path(room_id: str, tail: str = "") -> str:
    return f"/api/v1/agent/chats/{room_id}{tail}"


@asynccontextmanager
async def ws_connect(
    platform: Platform,
    *,
    key: str | None = None,
    agent_id: str | None = None,
    query: str = "",
) -> AsyncIterator[WebSocketConnection]:
    """Open a V2 socket as an agent (the seeded one by default).

    trio-websocket 0.12.2 never closes its TCP socket after a server-initiated
    close; the stream is closed by hand on the way out.
    """
    key = key if key is not None else platform.info.api_key
    agent_id = agent_id or platform.info.agent_id
    url = f"{platform.info.ws_url}?vsn=2.0.0&agent_id={agent_id}{query}"
    headers = [(b"x-api-key", key.encode())] if key else []
    async with open_websocket_url(
        url,
        extra_headers=headers,
        message_queue_size=64,
        connect_timeout=DEADLINE,
        disconnect_timeout=DEADLINE,
    ) as ws:
        try:
            yield ws
        finally:
            with trio.CancelScope(shield=True):
                stream = ws._stream  # trio-websocket defect workaround
                if ws.closed is not None:
                    await trio.aclose_forcefully(stream)


async def ws_refused(
    platform: Platform, *, key: str | None = None, agent_id: str | None = None, query: str = ""
) -> ConnectionRejected:
    """Attempt an upgrade that must be refused; return the refusal.

    trio-websocket leaks the TCP socket of a refused handshake, so this one
    brings its own stream and closes it.
    """
    key = key if key is not None else platform.info.api_key
    agent_id = agent_id or platform.info.agent_id
    port = int(platform.info.rest_url.rsplit(":", 1)[1])
    resource = f"/api/v1/socket/websocket?vsn=2.0.0&agent_id={agent_id}{query}"
    headers = [(b"x-api-key", key.encode())] if key else []
    refusals: list[ConnectionRejected] = []
    with trio.fail_after(DEADLINE):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        try:
            async with trio.open_nursery() as nursery:
                await wrap_client_stream(
                    nursery, stream, f"127.0.0.1:{port}", resource, extra_headers=headers
                )
                nursery.cancel_scope.cancel()
        except* ConnectionRejected as group:
            refusals.extend(e for e in group.exceptions if isinstance(e, ConnectionRejected))
        finally:
            await trio.aclose_forcefully(stream)
    assert refusals, "the upgrade was accepted"
    return refusals[0]


async def recv(ws: WebSocketConnection) -> list[Any]:
    with trio.fail_after(DEADLINE):
        frame = json.loads(await ws.get_message())
    assert isinstance(frame, list)
    return frame


async def send(ws: WebSocketConnection, *frame: Any) -> None:
    await ws.send_message(json.dumps(list(frame), separators=(",", ":")))


async def join(ws: WebSocketConnection, ref: str, topic: str) -> dict[str, Any]:
    """Join `topic` with `join_ref == ref`; return the reply payload."""
    await send(ws, ref, ref, topic, "phx_join", {})
    reply = await recv(ws)
    assert reply[:4] == [ref, ref, topic, "phx_reply"], reply
    payload: dict[str, Any] = reply[4]
    return payload


async def recv_event(ws: WebSocketConnection, event: str) -> list[Any]:
    """The next frame, which must be `event`."""
    frame = await recv(ws)
    assert frame[3] == event, frame
    return frame
