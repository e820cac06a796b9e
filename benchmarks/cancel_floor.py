"""The floor of a signal's cancel: what the libraries must do, with no runtime in between.

    .venv/bin/python benchmarks/hot_path.py --trials 60 --base OLD/src   # runs it beside

Run by `hot_path.py` as a third participant of its alternating trials (`floor`
in its table), in a process of its own like an agent under test:

- a bare trio-websocket client (the library and version band-trio uses, through
  `wrap_client_stream` as band-trio's socket does) joined to its
  `agent_control` topic on the embedded platform;
- a *held* task, `trio.sleep_forever()` inside a `CancelScope`, the way the
  bench's adapter holds a turn;
- after the bench's 50 ms idle, the platform sends one `agent.control` frame;
  the reading task takes it from trio-websocket, decodes the Phoenix frame and
  its payload with msgspec (into structs, as band-trio's wire layer does) and
  cancels the scope;
- the held task stamps in `except trio.Cancelled` (the bench adapter's `observe`,
  the same `os.write`), leaves the scope, and posts `working: false` through
  band-trio's own lean HTTP/1.1 pool (`band_trio.link._http_pool.HttpPool`, a warm
  keep-alive connection), whose arrival the platform stamps.

So `signal → task cancelled` is the floor of band-trio's `signal → adapter
cancelled`, and `signal → working:false arrives` the floor of its stop row (the
same one POST after the cancel; band-trio's interrupt row posts `processed`
instead, a request of the same size). Whatever band-trio takes beyond these is
its own code: routing, bookkeeping, the unwinding of a turn and its tasks.
"""

from __future__ import annotations

import sys
import urllib.parse

import msgspec
import trio
import trio_websocket

from band_trio.bench._protocol import exit_with_driver, observe
from band_trio.bench._subject import Subject
from band_trio.link._http_pool import HttpPool

__all__ = ["floor_trial"]


class _Frame(msgspec.Struct, array_like=True):
    join_ref: str | None
    ref: str | None
    topic: str
    event: str
    payload: msgspec.Raw


class _Control(msgspec.Struct):
    mode: str
    room_id: str | None = None
    scope: str | None = None
    correlation_id: str | None = None
    reason: str | None = None


_frames = msgspec.json.Decoder(_Frame)
_controls = msgspec.json.Decoder(_Control)
_IDLE = msgspec.json.encode({"working": False})


async def _held(k: int, scope: trio.CancelScope, pool: HttpPool, target: str) -> None:
    """One held 'turn': park until cancelled, stamp, then the one REST call."""
    with scope:
        observe("enter", str(k))
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            observe("cancel", str(k))
            raise
    await pool.request("POST", target, _IDLE, 65536)


async def _client(ws_url: str, rest_url: str, agent_id: str, key: str, room: str) -> None:
    parts = urllib.parse.urlsplit(ws_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    resource = f"{parts.path or '/'}?vsn=2.0.0&agent_id={agent_id}"
    headers = {"X-API-Key": key, "content-type": "application/json", "accept": "application/json"}
    target = urllib.parse.urlsplit(rest_url).path + f"/api/v1/agent/chats/{room}/activity"
    stream = await trio.open_tcp_stream(host, port)
    pool = HttpPool(rest_url, headers, connections=4, context=None, close_grace=1.0)
    async with pool, trio.open_nursery() as nursery:
        ws = await trio_websocket.wrap_client_stream(
            nursery,
            stream,
            f"{host}:{port}",
            resource,
            extra_headers=[(b"x-api-key", key.encode())],
            message_queue_size=64,
        )
        topic = f"agent_control:{agent_id}"
        await ws.send_message(msgspec.json.encode(["1", "1", topic, "phx_join", {}]).decode())
        while (frame := _frames.decode(await ws.get_message())).event != "phx_reply":
            pass
        for _ in range(20):  # warm the pooled connection, as an agent's would be
            await pool.request("POST", target, _IDLE, 65536)
        observe("ready", "floor")
        k = 0
        while True:
            scope = trio.CancelScope()
            nursery.start_soon(_held, k, scope, pool, target)
            while True:
                frame = _frames.decode(await ws.get_message())
                if frame.event == "agent.control" and _controls.decode(frame.payload).mode in (
                    "interrupt",
                    "stop",
                ):
                    scope.cancel()
                    break
            k += 1


async def floor_trial(subject: Subject, k: int, platform, watch, settle: float, mode: str):  # type: ignore[no-untyped-def]
    """Trial `k` of the floor client: (signal → cancelled, signal → working:false) in s."""
    agent, room = subject.identity.agent_id, subject.identity.rooms[0]
    with trio.fail_after(10):
        await subject.wait("enter", str(k))
        await trio.sleep(settle)
        position = watch.position
        platform.send_control(agent, mode, room_id=room)
        sent = await watch.wait(("control", agent), position)
        cancelled = await subject.wait("cancel", str(k))
        arrived = await watch.wait(("idle", agent, room), position)
    return cancelled - sent, arrived - sent


def main() -> None:
    exit_with_driver()
    trio.run(_client, *sys.argv[1:6])


if __name__ == "__main__":
    main()
