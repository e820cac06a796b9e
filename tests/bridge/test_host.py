"""Bridge → host, end to end over loopback: a stop pressed in the room stops the adapter
behind the bridge, leaves the message `processing`, and play replays it once."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
import trio

from band_trio import Adapter, Policy, Turn
from band_trio.bridge import BridgePolicy, HttpTargetConfig
from band_trio.host import HostApp, serve_host
from band_trio.platform import Platform
from support import HOST_TOKEN, Recorder, echo, envelope

from ._helpers import identity, running_bridge, running_host
from .conftest import seeded


class _FirstBlocks(Adapter):
    """The first turn waits until cancelled; later ones answer."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.cancelled: list[str] = []
        self.started = trio.Event()
        self.saw_cancel = trio.Event()
        self.told: list[str | None] = []

    async def on_turn(self, turn: Turn) -> None:
        self.calls.append(turn.message.id)
        self.told.append(turn.last_abort.kind if turn.last_abort is not None else None)
        self.started.set()
        if len(self.calls) == 1:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled.append(turn.message.id)
                self.saw_cancel.set()
                raise
        await turn.reply(f"answered: {turn.message.content}")


BEARER = {"authorization": f"Bearer {HOST_TOKEN}"}
JSON = {"content-type": "application/json"}


def _settles(url: str) -> HttpTargetConfig:
    """The host claims and settles each message itself: the bridge must not."""
    return HttpTargetConfig(url=url, settle="target", token=HOST_TOKEN)


def _status(platform: Platform, message_id: str) -> str | None:
    agent_id = platform.info.agent_id
    assert agent_id
    entry = platform.delivery(message_id).get(agent_id)
    return None if entry is None else str(entry["status"])


async def test_stop_in_the_room_stops_the_host_adapter_and_play_replays_it_once(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    async with (
        running_host(platform, adapter) as (_, url),
        running_bridge([identity(platform, _settles(url))]) as run,
    ):
        with trio.fail_after(10):
            message_id = platform.post_message(room_id, user_id, "work on this")
            await adapter.started.wait()
            await platform.wait_until(lambda: _status(platform, message_id) == "processing")
            platform.send_control(agent_id, "stop", room_id=room_id)
            await adapter.saw_cancel.wait()
            await run.bridge.wait_until(lambda: run.bridge.identities[agent_id].rooms_idle)
            assert _status(platform, message_id) == "processing"  # left for the replay
            platform.send_control(agent_id, "play", room_id=room_id)
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
            await run.bridge.wait_until(lambda: run.bridge.identities[agent_id].rooms_idle)
    assert adapter.calls == [message_id, message_id]  # replayed once
    assert adapter.cancelled == [message_id]
    assert adapter.told == [None, "stop"]  # the replay is told why the first was cut off
    replies = [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]
    assert replies == ["answered: work on this"]
    assert platform.stats["reopened"] == 0  # the replay's claim kept the stopped attempt


async def test_the_host_answers_a_finished_turn_and_ignores_other_events(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    adapter.calls.append("already one")  # answer at once
    async with running_host(platform, adapter) as (app, url):
        message_id = platform.post_message(room_id, user_id, "hi")
        payload = {
            "id": message_id,
            "content": "hi",
            "message_type": "text",
            "sender_type": "User",
            "sender_id": user_id,
            "inserted_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z",
        }
        envelope = {
            "event_type": "message_created",
            "agent_id": agent_id,
            "room_id": room_id,
            "payload": payload,
            "forwarded_at": "2026-12-01T00:00:00Z",
        }
        async with httpx2.AsyncClient(headers=BEARER) as client:
            with trio.fail_after(5):
                done = await client.post(url, json=envelope)
                again = await client.post(url, json=envelope)
                other = await client.post(url, json={**envelope, "event_type": "room_added"})
                wrong = await client.post(url, json={**envelope, "agent_id": "someone else"})
                junk = await client.post(url, content=b"not json", headers=JSON)
                deep = b'{"event_type": "message_created", "payload": ' + b'{"a": ' * 100_000
                nested = await client.post(url, content=deep, headers=JSON)
                too_big = b"x" * (app.bridge_policy.host_max_body + 1)
                big = await client.post(url, content=too_big, headers=JSON)
                getting = await client.get(url)
                health = await client.get(f"{url}health")
        assert (
            done.json() == {"outcome": "processed"} and _status(platform, message_id) == "processed"
        )
        assert again.json() == {"outcome": "completed"}  # the ledger: never twice
        assert other.json() == {"outcome": "ignored"}
        assert wrong.status_code == 422 and junk.status_code == 422
        assert nested.status_code == 422 and "nested too deeply" in nested.text
        assert big.status_code == 413 and getting.status_code == 405
        assert health.status_code == 200 and health.json()["turns"] == 1
        assert health.json()["outcomes"] == {"processed": 1, "completed": 1, "ignored": 1}
        assert app.turns == 1


async def test_an_interrupt_reaches_the_host_through_the_forward_and_consumes_the_message(
    platform: Platform,
) -> None:
    """An interrupt does not close the platform's gate: the forward's request going
    away is the only thing that reaches the host, and it is enough. The bridge then
    consumes the message (`processed`), so a reconnect's rehydration does not run the
    adapter on it again."""
    agent_id, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    async with (
        running_host(platform, adapter) as (app, url),
        running_bridge([identity(platform, _settles(url))]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(5):
            message_id = platform.post_message(room_id, user_id, "interrupt me")
            await adapter.started.wait()
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            await adapter.saw_cancel.wait()
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
            while app.running(room_id) is not None:  # the turn settles (working: false)
                await app.changes.wait()
            before = ident.link_connects
            assert platform.faults.drop_socket(agent_id)
            await run.bridge.wait_until(lambda: ident.link_connects > before and ident.rooms_idle)
    assert adapter.cancelled == [message_id]
    assert adapter.calls == [message_id]  # never run again
    assert [m.content for m in platform.messages(room_id) if m.sender_id == agent_id] == []
    assert app.outcomes["consumed"] == 1  # the host consumed it, told by the bridge
    assert platform.stats["reopened"] == 0


async def test_a_stop_reaches_the_a2a_task_behind_the_bridge_and_the_host(
    platform: Platform,
) -> None:
    """The whole path: room → bridge → host → A2A adapter → a real a2a-sdk task. The
    stop cancels the forward, the host's turn, and the task (CancelTask, confirmed)."""
    from band_trio.adapters import A2AAdapter
    from peers import shared_a2a_peer

    agent_id, room_id, user_id = seeded(platform)
    async with shared_a2a_peer() as peer:
        adapter = A2AAdapter(peer.url)
        async with (
            running_host(platform, adapter) as (app, url),
            running_bridge([identity(platform, _settles(url))]) as run,
        ):
            with trio.fail_after(15):
                message_id = platform.post_message(
                    room_id, user_id, "mode=normal chunks=400 delay=0.05"
                )
                started = await peer.wait_for(event="execute_started")
                platform.send_control(agent_id, "stop", room_id=room_id)
                await peer.wait_for(event="cancel_request", task_id=started["task_id"])
                while app.stops.stats.sent == 0 or app.running(room_id) is not None:
                    await app.changes.wait()
                await run.bridge.wait_until(lambda: run.bridge.identities[agent_id].rooms_idle)
        assert app.stops.stats.confirmed == 1
        assert _status(platform, message_id) == "processing"  # left for play


async def test_a_host_stopping_cancels_its_open_turns_after_the_grace(
    platform: Platform,
) -> None:
    """Shutdown is not an interrupt: a turn still running when the host's grace ends
    is cancelled and its message left `processing` (replayed later), never marked."""
    agent_id, room_id, user_id = seeded(platform)
    info = platform.info
    adapter = _FirstBlocks()
    message_id = platform.post_message(room_id, user_id, "still running at the stop")
    body = envelope(platform, message_id, "still running at the stop")
    app = HostApp(
        adapter, agent_id=agent_id, token=HOST_TOKEN, bridge_policy=BridgePolicy(health_grace=0.1)
    )
    stop = trio.Event()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(
                functools.partial(
                    serve_host,
                    app,
                    api_key=info.api_key or "",
                    rest_url=info.rest_url,
                    host="127.0.0.1",
                    port=0,
                    stop=stop,
                )
            )

            async def forward() -> None:
                async with httpx2.AsyncClient(timeout=None, headers=BEARER) as client:
                    with contextlib.suppress(httpx2.HTTPError):
                        await client.post(f"http://127.0.0.1:{port}/", json=body)

            nursery.start_soon(forward)
            await adapter.started.wait()
            stop.set()
            await adapter.saw_cancel.wait()
    assert _status(platform, message_id) == "processing"


async def test_a_host_left_at_settle_bridge_still_processes_once_and_the_bridge_says_why(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    """The bridge claims, the host claims the same attempt, runs and settles; the
    bridge's own `processed` mark then finds no live attempt: one INFO line per
    identity says to set `settle = "target"`, and the message is processed once."""
    caplog.set_level(logging.INFO, logger="band_trio.bridge")
    agent_id, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    adapter.calls.append("already one")  # answer at once
    async with (
        running_host(platform, adapter) as (_, url),
        running_bridge([identity(platform, HttpTargetConfig(url=url, token=HOST_TOKEN))]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(5):
            first = platform.post_message(room_id, user_id, "one")
            await platform.wait_until(lambda: _status(platform, first) == "processed")
            await run.bridge.wait_until(lambda: ident.counters.delivered == 1 and ident.rooms_idle)
            second = platform.post_message(room_id, user_id, "two")
            await platform.wait_until(lambda: _status(platform, second) == "processed")
            await run.bridge.wait_until(lambda: ident.counters.delivered == 2 and ident.rooms_idle)
    assert adapter.calls == ["already one", first, second]  # each once
    hints = [r for r in caplog.records if 'settle = "target"' in r.getMessage()]
    assert len(hints) == 1 and hints[0].levelno == logging.INFO  # once per identity
    assert agent_id in hints[0].getMessage()


async def test_the_host_runs_its_adapter_for_as_long_as_it_serves(platform: Platform) -> None:
    left: list[str] = []

    class Owning(_FirstBlocks):
        inside = False

        @asynccontextmanager
        async def _running(self) -> AsyncIterator[None]:
            self.inside = True
            try:
                yield
            finally:
                self.inside = False
                left.append("lifespan() left")

        def lifespan(self) -> contextlib.AbstractAsyncContextManager[None]:
            return self._running()

    adapter = Owning()
    with trio.fail_after(10):
        async with running_host(platform, adapter):
            assert adapter.inside and not left
    assert left == ["lifespan() left"]


async def test_the_hosts_health_counts_its_worker_threads(platform: Platform) -> None:
    """`threads` in `/health` (with the token): the host's own limiter, sized by
    `Policy.adapter_threads`, and the threads an abort abandoned (issue 21, item 4)."""
    with trio.fail_after(20):
        async with running_host(platform, Recorder(echo), policy=Policy(adapter_threads=5)) as (
            _,
            url,
        ):
            bearer = {"authorization": f"Bearer {HOST_TOKEN}"}  # the counts are the token's
            async with httpx2.AsyncClient(headers=bearer) as client:
                health = (await client.get(f"{url}health")).json()
    assert health["threads"] == {"limit": 5, "running": 0, "abandoned": 0, "abandoned_running": 0}


async def test_a_restarted_host_runs_no_message_the_platform_shows_failed(
    platform: Platform,
) -> None:
    """The attempt budget is the platform's: a second host (a restart) reads the
    `failed` status and its attempts, and answers `exhausted` without a turn."""
    agent_id, room_id, user_id = seeded(platform)

    async def broken(turn: Turn) -> None:
        raise RuntimeError("the adapter broke")

    message_id = platform.post_message(room_id, user_id, "hi")
    payload = {
        "id": message_id, "content": "hi", "message_type": "text", "sender_type": "User",
        "sender_id": user_id, "inserted_at": "2026-12-01T00:00:00Z",
        "updated_at": "2026-12-01T00:00:00Z",
    }  # fmt: skip
    sent = {
        "event_type": "message_created", "agent_id": agent_id, "room_id": room_id,
        "payload": payload, "forwarded_at": "2026-12-01T00:00:00Z",
    }  # fmt: skip
    outcomes = []
    for _ in range(2):
        adapter = Recorder(broken)
        async with (
            running_host(platform, adapter) as (_, url),
            httpx2.AsyncClient(headers=BEARER) as client,
        ):
            with trio.fail_after(5):
                outcomes.append((await client.post(url, json=sent)).json()["outcome"])
        assert _status(platform, message_id) == "failed"
    assert outcomes == ["failed", "exhausted"]
    errors = [e for e in platform.store.events(room_id) if e["message_type"] == "error"]
    assert len(errors) == 1


async def test_a_forward_gone_while_its_turn_waits_behind_another_runs_nothing(
    platform: Platform,
) -> None:
    """Turns of a room run one at a time in the room's order (the runtime's room):
    a second forward waits behind the first. If its request goes away meanwhile,
    its unit is taken back: its message is never claimed nor run, and is left
    for the bridge's next catch-up."""
    _, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    async with running_host(platform, adapter) as (app, url):
        first = platform.post_message(room_id, user_id, "first")
        second = platform.post_message(room_id, user_id, "second")
        async with httpx2.AsyncClient(headers=BEARER, timeout=None) as client:
            with trio.fail_after(5):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_post_until, client, url, envelope(platform, first, "first"),
                                       trio.CancelScope())  # fmt: skip
                    await adapter.started.wait()
                    waiting = trio.CancelScope()
                    nursery.start_soon(_post_until, client, url,
                                       envelope(platform, second, "second"), waiting)  # fmt: skip
                    while len(app.rooms.queued(room_id)) != 1:  # behind the first
                        await app.changes.wait()
                    waiting.cancel()  # the second forward's request goes away
                    while app.rooms.queued(room_id):
                        await app.changes.wait()
                    nursery.cancel_scope.cancel()  # and the first's: its turn stopped
            while app.running(room_id) is not None:
                await app.changes.wait()
    assert adapter.calls == [first]  # the second never ran
    claims = [e for e in platform.log() if (e.path or "").endswith(f"{second}/processing")]
    assert claims == [] and _status(platform, second) not in ("processing", "processed")


async def _post_until(
    client: httpx2.AsyncClient, url: str, body: dict[str, object], scope: trio.CancelScope
) -> None:
    with scope:
        await client.post(url, json=body)  # the answer is not the subject
