"""The scale floor: a bare client that does a runtime's start-up work, and nothing else.

    python -m band_trio.bench._scale_floor    (commands on stdin, one JSON object a line)

Run in a process of its own by the driver (`_bare`), alternating with the agents
under test, so that every scale row has its floor from the same run. It uses the
libraries band-trio uses (trio-websocket, and band-trio's own HTTP/1.1 pool,
`link._http_pool.HttpPool`, with the same 32 connections) and no runtime between
them: no rooms, lanes, retries or decoding. It does what an ideal runtime would:

1. the first line names the platform, the agent, its rooms and the user; the socket opens,
   the agent's two topics are joined, then every room's `chat_room` join is sent
   at once, each room's `room_participants` join the moment its `chat_room` reply
   comes, and each room's `GET .../messages/next` the moment its `room_participants`
   reply comes (32 connections; the requests beyond wait for one, first in, first
   out). The platform's log stamps all of it (the driver's `LogWatch`); the client
   says `ready` once every room's `/next` is answered;
2. `{"marks": [[room, message], ...], "close": false}`: every message is claimed
   (`/processing`, untimed), then every `/processed` mark sent at once: the mass
   abort's floor. The stamp `wave` is the moment the first one is sent, `done`
   the moment the last answer came;
3. the same with `"close": true`: after the marks (none for an idle teardown) the
   socket and the pool are closed, `closed` stamped, and the process exits: the
   teardown's floor.

The end of its stdin (the driver gone) ends it too. Each stamp is an observation
line (`_protocol.observe`); the clock is the driver's (`perf_counter`).
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import trio
import trio_websocket

from ..link import HttpPool
from ._protocol import observe

__all__ = ["CONNECTIONS"]

CONNECTIONS = 32
"""The REST connections, as band-trio's `Policy.rest_connections`."""
LIMIT = 1 << 20
_IDLE = json.dumps({"working": False}).encode()
DEADLINE = 120.0
"""Per step: 10,000 rooms' joins and `/next` on a loaded machine take tens of seconds."""


@dataclass(eq=False)
class _Client:
    ws: trio_websocket.WebSocketConnection
    pool: HttpPool
    base: str
    agent: str
    rooms: list[str]
    nursery: trio.Nursery
    pending: dict[str, tuple[str, str]] = field(default_factory=dict)
    ref: int = 0
    agent_topics: trio.Event = field(default_factory=trio.Event)
    synced: trio.Event = field(default_factory=trio.Event)
    answered: int = 0
    reply: bytes = b""
    """A busy turn's reply, as the bench's agents post it (to the user who asked)."""
    send_part: trio.MemorySendChannel[str] | None = None

    async def call(self, method: str, path: str, body: bytes | None = None) -> int:
        answer = await self.pool.request(method, self.base + path, body, LIMIT)
        return answer.status_code

    async def post(self, path: str, body: bytes) -> None:
        status = await self.call("POST", path, body)
        if status not in (200, 201):
            raise RuntimeError(f"POST {path}: {status}")

    async def join(self, topic: str, room: str) -> None:
        self.ref += 1
        ref = str(self.ref)
        self.pending[ref] = (topic, room)
        await self.ws.send_message(json.dumps([ref, ref, topic, "phx_join", {}]))

    async def read(self) -> None:
        """Route every join reply; never waits on a send (a second task sends the
        `room_participants` joins), so the platform's queue to us always drains."""
        assert self.send_part is not None
        agent_left = 2
        while True:
            frame = json.loads(await self.ws.get_message())
            if frame[3] != "phx_reply" or frame[1] not in self.pending:
                continue  # a push (a posted message): the bare client ignores it
            topic, room = self.pending.pop(frame[1])
            if frame[4].get("status") != "ok":
                raise RuntimeError(f"join of {topic} refused: {frame[4]}")
            if not room:
                agent_left -= 1
                if not agent_left:
                    self.agent_topics.set()
            elif topic.startswith("chat_room:"):
                self.send_part.send_nowait(room)
            else:
                self.nursery.start_soon(self.sync, room)

    async def send_parts(self, receive: trio.MemoryReceiveChannel[str]) -> None:
        async for room in receive:
            await self.join(f"room_participants:{room}", room)

    async def sync(self, room: str) -> None:
        status = await self.call("GET", f"chats/{room}/messages/next")
        if status not in (200, 204):
            raise RuntimeError(f"GET /next of {room}: {status}")
        self.answered += 1
        if self.answered == len(self.rooms):
            self.synced.set()

    async def start_up(self) -> None:
        send, receive = trio.open_memory_channel[str](len(self.rooms) + 1)
        self.send_part = send
        self.nursery.start_soon(self.read)
        self.nursery.start_soon(self.send_parts, receive)
        for topic in (f"agent_control:{self.agent}", f"agent_rooms:{self.agent}"):
            await self.join(topic, "")
        await self.agent_topics.wait()
        for room in self.rooms:
            await self.join(f"chat_room:{room}", room)
        if self.rooms:
            await self.synced.wait()

    async def marks(self, marks: list[tuple[str, str]], label: str, settle: bool) -> None:
        """Claim every message (untimed), then mark them all `processed` at once; with
        `settle`, each room as a turn that ends settles: its reply, its mark, then
        `working: false`, every room at once."""
        claims = list(marks)

        async def claimer() -> None:
            while claims:
                room, message = claims.pop()
                status = await self.call("POST", f"chats/{room}/messages/{message}/processing")
                if status != 200:
                    raise RuntimeError(f"claim of {message}: {status}")

        async with trio.open_nursery() as nursery:
            for _ in range(CONNECTIONS):
                nursery.start_soon(claimer)

        async def mark(room: str, message: str) -> None:
            if settle:
                await self.post(f"chats/{room}/messages", self.reply)
            status = await self.call("POST", f"chats/{room}/messages/{message}/processed")
            if status != 200:
                raise RuntimeError(f"mark of {message}: {status}")
            if settle:
                await self.post(f"chats/{room}/activity", _IDLE)

        observe("wave", label)
        async with trio.open_nursery() as nursery:
            for room, message in marks:
                nursery.start_soon(mark, room, message)
        observe("done", label)


async def _lines() -> AsyncIterator[dict[str, Any]]:
    """The driver's commands; ends with its stdin."""
    stdin = trio.lowlevel.FdStream(sys.stdin.fileno())
    buffer = b""
    while chunk := await stdin.receive_some():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.strip():
                yield json.loads(line)


async def _main() -> None:
    commands = _lines()
    spec = await anext(commands)
    rest = spec["rest"].rstrip("/")
    base = urllib.parse.urlsplit(rest).path + "/api/v1/agent/"
    url = f"{spec['ws']}?vsn=2.0.0&agent_id={spec['agent']}"
    headers = [(b"x-api-key", spec["key"].encode())]
    pool = HttpPool(
        rest,
        {
            "x-api-key": spec["key"],
            "accept": "application/json",
            "content-type": "application/json",
        },
        connections=CONNECTIONS,
        context=None,
        close_grace=1.0,
    )
    async with (
        pool,
        trio_websocket.open_websocket_url(url, extra_headers=headers, message_queue_size=0) as ws,
    ):
        observe("open", spec["agent"])
        async with trio.open_nursery() as nursery:
            client = _Client(ws, pool, base, spec["agent"], list(spec["rooms"]), nursery)
            reply = {"content": "ok", "mentions": [{"id": spec["user"]}]}
            client.reply = json.dumps({"message": reply}).encode()
            with trio.fail_after(DEADLINE):
                await client.start_up()
            observe("ready", spec["agent"])
            close = False
            async for command in commands:
                marks = [(room, message) for room, message in command["marks"]]
                with trio.fail_after(DEADLINE):
                    await client.marks(marks, str(command["label"]), bool(command.get("settle")))
                if command["close"]:
                    close = True
                    break
            nursery.cancel_scope.cancel()
        # the socket's close handshake (every topic left with it), then the pool
    if close:
        observe("closed", spec["agent"])


if __name__ == "__main__":
    trio.run(_main)
