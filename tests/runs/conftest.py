"""The runs API's test kit: a real server on loopback, a client, test adapters, stubllm.

Every test talks to `open_runs_api` (hypercorn, trio worker) over a real socket
with httpx2; the model server is stubllm 0.1.5 in its own process, its events
read through a FIFO as they are written (`band_trio.bench._peer.open_peer`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
import trio

from band_trio.bench._peer import Peer, open_peer
from band_trio.contract import Adapter, StopOutcome, Turn
from band_trio.runs import RunsPolicy, RunsServer, open_runs_api

KEY = "test-key-0123456789abcdef"
AUTH = {"authorization": f"Bearer {KEY}"}
JSON = {"content-type": "application/json"}
"""A body the server reads says it is JSON (any other is refused unread: 415)."""
DEADLINE = 10.0
"""What any one wait in these tests may take before the test fails (never a sleep)."""


@dataclass
class Api:
    """A served runs API and a client authorised for it."""

    server: RunsServer
    client: httpx2.AsyncClient

    @property
    def service(self) -> Any:
        return self.server.service

    async def start(self, input: Any = "hello", **fields: Any) -> str:
        response = await self.client.post("/v1/runs", json={"input": input, **fields})
        assert response.status_code == 202, response.text
        body = response.json()
        assert body["status"] == "started"
        return str(body["run_id"])

    async def status(self, run_id: str) -> dict[str, Any]:
        response = await self.client.get(f"/v1/runs/{run_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def stop(self, run_id: str, reason: str | None = None, *, wait: bool = False) -> Any:
        body = {"reason": reason} if reason is not None else None
        query = "?wait=true" if wait else ""
        return await self.client.post(f"/v1/runs/{run_id}/stop{query}", json=body)

    async def settled(self, run_id: str) -> None:
        with trio.fail_after(DEADLINE):
            await self.service.runs[run_id].settled.wait()

    async def events(self, run_id: str, *, last_event_id: int | None = None) -> Stream:
        """The whole event stream of a run, read to its end."""
        async with self.subscribe(run_id, last_event_id=last_event_id) as stream:
            await stream.until_end()
        return stream

    @asynccontextmanager
    async def subscribe(
        self, run_id: str, *, last_event_id: int | None = None
    ) -> AsyncIterator[Stream]:
        headers = {} if last_event_id is None else {"last-event-id": str(last_event_id)}
        async with self.client.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as r:
            assert r.status_code == 200, (await r.aread()).decode()
            assert r.headers["content-type"] == "text/event-stream"
            yield Stream(r)


@dataclass
class Stream:
    """An event stream being read: frames parsed as they come."""

    response: httpx2.Response
    events: list[dict[str, Any]] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    ended: bool = False
    _lines: Any = None
    _id: int | None = None

    @property
    def names(self) -> list[str]:
        return [event["event"] for event in self.events]

    async def next(self, *, comment: str | None = None) -> dict[str, Any] | None:
        """The next event (None at the end of the stream), under the test deadline; with
        `comment`, return (None) as soon as that comment line is read instead."""
        if self._lines is None:
            self._lines = self.response.aiter_lines()
        with trio.fail_after(DEADLINE):
            async for line in self._lines:
                if line.startswith("id: "):
                    self._id = int(line[4:])
                elif line.startswith("data: "):
                    event = json.loads(line[6:])
                    self.events.append(event)
                    assert self._id is not None, "every event has an id"
                    self.ids.append(self._id)
                    return dict(event)
                elif line.startswith(":"):
                    self.comments.append(line[1:].strip())
                    if self.comments[-1] == comment:
                        return None
        self.ended = True
        return None

    async def until(self, name: str) -> dict[str, Any]:
        while True:
            event = await self.next()
            assert event is not None, f"the stream ended before {name}: {self.names}"
            if event["event"] == name:
                return event

    async def until_end(self) -> None:
        while await self.next() is not None:
            pass


@asynccontextmanager
async def serve(adapter: Adapter, policy: RunsPolicy | None = None) -> AsyncIterator[Api]:
    async with (
        open_runs_api(adapter, api_key=KEY, policy=policy) as server,
        httpx2.AsyncClient(base_url=server.url, headers={**AUTH, **JSON}, timeout=30) as client,
    ):
        yield Api(server, client)


@asynccontextmanager
async def stubllm() -> AsyncIterator[Peer]:
    """stubllm 0.1.5 (50 ms a chunk for `[slow]`) in its own process."""
    async with open_peer("stubllm", "stubllm_server.py", "--chunk-delay-ms", "50") as peer:
        yield peer


# -- adapters ------------------------------------------------------------------------------


class Scripted(Adapter):
    """Does what the input says: `fail`, `wait` (until released), `shield` (ignore the
    cancel until released), `tools`, `twice`; otherwise replies `echo: <input>`."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.entered = trio.Event()
        self.turns: list[Turn] = []
        self.histories: list[list[tuple[str, str]]] = []
        """What each turn's `history()` gave at its start: (sender type, content)."""

    async def on_turn(self, turn: Turn) -> None:
        self.turns.append(turn)
        self.histories.append([(m.sender_type, m.content) for m in await turn.history()])
        text = turn.message.content
        self.entered.set()
        if text == "fail":
            raise RuntimeError("the adapter failed")
        if text == "wait":
            await self.release.wait()
        elif text == "shield":
            with trio.CancelScope(shield=True):
                await self.release.wait()
        elif text == "tools":
            await turn.send_event("thinking", message_type="thought")
            await turn.send_event(
                'lookup({"q": 1})',
                message_type="tool_call",
                metadata={"tool_call_id": "c1", "name": "lookup"},
            )
            await turn.send_event(
                "sunny",
                message_type="tool_result",
                metadata={"tool_call_id": "c1", "name": "lookup"},
            )
        elif text == "twice":
            await turn.reply("one")
        await turn.reply(f"echo: {text}")


class GatedRemote(Adapter):
    """Starts remote work whose start call and stop call the test holds open:
    `start_gate` releases the start (it then reveals handle "h1"), `stop_gate` lets
    the stop confirm. Nothing here is cancellable by accident: both are the
    contract's shielded parts (`work.starting()`, the remote stop)."""

    def __init__(self) -> None:
        self.start_gate = trio.Event()
        self.stop_gate = trio.Event()
        self.starting = trio.Event()
        self.stopping = trio.Event()
        self.stopped: list[str] = []

    async def on_turn(self, turn: Turn) -> None:
        async def stop(handle: str) -> StopOutcome:
            self.stopping.set()
            await self.stop_gate.wait()
            self.stopped.append(handle)
            return StopOutcome.CONFIRMED

        async with turn.remote(stop=stop, name="gated work") as work:
            with work.starting():
                self.starting.set()
                await self.start_gate.wait()
                work.started("h1")
            await trio.sleep_forever()


@pytest.fixture
def scripted() -> Scripted:
    return Scripted()
