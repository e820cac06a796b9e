"""Bridge → host, an interrupt in the host's claim window of a *replayed* message.

A stop leaves the message `processing`; play replays it; the host reads it and
claims it again. An interrupt that lands while that claim is still in flight
must consume the message without re-opening it: a `/processing` after
`processed` opens a new attempt (band-client-rest 0.0.51), so whoever consumes
must come after the claim's answer. The host is that party: the bridge tells it
the forward was interrupted, and it consumes on its own claim (as the
runtime's turn does)."""

from __future__ import annotations

import httpx2
import trio

from band_trio.platform import Platform
from support import envelope

from ._helpers import identity, running_bridge, running_host
from .conftest import seeded
from .test_host import BEARER, _FirstBlocks, _settles, _status


def _claims(platform: Platform, message_id: str) -> list[int | None]:
    suffix = f"{message_id}/processing"
    return [
        e.status for e in platform.log() if e.kind == "rest" and (e.path or "").endswith(suffix)
    ]


def _marks(platform: Platform, message_id: str) -> list[int | None]:
    suffix = f"{message_id}/processed"
    return [
        e.status for e in platform.log() if e.kind == "rest" and (e.path or "").endswith(suffix)
    ]


async def test_an_interrupt_in_the_hosts_claim_window_of_a_replay_consumes_and_reopens_nothing(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    async with (
        running_host(platform, adapter) as (app, url),
        running_bridge([identity(platform, _settles(url))]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(10):
            message_id = platform.post_message(room_id, user_id, "stopped, then interrupted")
            await adapter.started.wait()
            platform.send_control(agent_id, "stop", room_id=room_id)
            await adapter.saw_cancel.wait()
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            while app.running(room_id) is not None:
                await app.changes.wait()
            assert _status(platform, message_id) == "processing"  # left for the replay
            hold = platform.faults.hold_rest("processing", count=1, message_id=message_id)
            platform.send_control(agent_id, "play", room_id=room_id)
            await hold.arrived.wait()  # the host's claim of the replay is in flight
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            # the bridge acts on it while the claim is still held: a consuming mark of
            # its own (which the claim would then re-open), or telling the host
            async with trio.open_nursery() as acted:

                async def marked() -> None:
                    await platform.wait_until(lambda: bool(_marks(platform, message_id)))
                    acted.cancel_scope.cancel()

                async def told() -> None:
                    while app.rooms.interrupts == 0:
                        await app.changes.wait()
                    acted.cancel_scope.cancel()

                acted.start_soon(marked)
                acted.start_soon(told)
            hold.release()
            await platform.wait_until(lambda: len(_claims(platform, message_id)) == 2)
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            while app.running(room_id) is not None:
                await app.changes.wait()
    assert platform.stats["reopened"] == 0
    assert adapter.calls == [message_id]  # the interrupted replay never ran the adapter
    assert _claims(platform, message_id) == [200, 200]  # the mark on the replay's claim
    assert [m.content for m in platform.messages(room_id) if m.sender_id == agent_id] == []
    assert platform.delivery(message_id)[agent_id]["status"] == "processed"


def _interrupted(platform: Platform, message_id: str) -> dict[str, object]:
    agent_id, room_id, _ = seeded(platform)
    return {
        "event_type": "message_interrupted",
        "agent_id": agent_id,
        "room_id": room_id,
        "payload": {"id": message_id},
        "forwarded_at": "2026-12-01T00:00:00Z",
    }


async def test_a_notice_before_the_request_goes_away_consumes_on_the_turns_own_claim(
    platform: Platform,
) -> None:
    """The notice reaches the host while its turn runs (before the forward's request
    goes away): the turn is aborted as an interrupt and consumes the message on its
    own claim; the forward is answered `consumed`, the notice `completed`."""
    _, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    message_id = platform.post_message(room_id, user_id, "interrupt me by notice")
    answers: list[httpx2.Response] = []
    async with (
        running_host(platform, adapter) as (_, url),
        httpx2.AsyncClient(headers=BEARER, timeout=None) as client,
    ):

        async def forward() -> None:
            forwarded = envelope(platform, message_id, "interrupt me by notice")
            answers.append(await client.post(url, json=forwarded))

        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:  # ends once the forward is answered
                nursery.start_soon(forward)
                await adapter.started.wait()
                told = await client.post(url, json=_interrupted(platform, message_id))
    assert told.json() == {"outcome": "completed"}
    assert answers[0].status_code == 200 and answers[0].json() == {"outcome": "consumed"}
    assert adapter.cancelled == [message_id]
    assert _status(platform, message_id) == "processed"
    assert _claims(platform, message_id) == [200]  # one claim, then the mark on it
    assert platform.stats["reopened"] == 0


async def test_a_notice_for_a_message_processed_already_claims_nothing(
    platform: Platform,
) -> None:
    """A host that does not know the message (another host answered it, or this one
    restarted) reads before it claims: `processed` is not among the unprocessed
    messages, so nothing re-opens it. A notice without an id is refused."""
    _, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    adapter.calls.append("answer at once")
    message_id = platform.post_message(room_id, user_id, "answered, then a notice")
    async with httpx2.AsyncClient(headers=BEARER, timeout=None) as client:
        with trio.fail_after(5):
            async with running_host(platform, adapter) as (_, url):
                forwarded = envelope(platform, message_id, "answered, then a notice")
                done = await client.post(url, json=forwarded)
            async with running_host(platform, _FirstBlocks()) as (_, url):
                told = await client.post(url, json=_interrupted(platform, message_id))
                bad = _interrupted(platform, message_id)
                bad["payload"] = {"id": 7}
                refused = await client.post(url, json=bad)
    assert done.json() == {"outcome": "processed"}
    assert told.status_code == 404 and told.json() == {"outcome": "unknown"}
    assert refused.status_code == 422
    assert _claims(platform, message_id) == [200]
    assert platform.stats["reopened"] == 0


async def test_a_reconnect_while_the_host_settles_answers_once_and_reopens_nothing(
    platform: Platform,
) -> None:
    """The bridge's socket drops while the host's `processed` mark is held: the rejoin's
    catch-up finds the message still `processing` and may forward it again; the host
    (its room's turns one at a time, its ledger) answers it once, claims it once."""
    agent_id, room_id, user_id = seeded(platform)
    adapter = _FirstBlocks()
    adapter.calls.append("answer at once")
    async with (
        running_host(platform, adapter) as (app, url),
        running_bridge([identity(platform, _settles(url))]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(10):
            hold = platform.faults.hold_rest("processed", count=1)
            message_id = platform.post_message(room_id, user_id, "settle slowly")
            await hold.arrived.wait()
            before = ident.link_connects
            assert platform.faults.drop_socket(agent_id)
            await run.bridge.wait_until(lambda: ident.link_connects > before)
            hold.release()
            await platform.wait_until(lambda: _status(platform, message_id) == "processed")
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            while app.running(room_id) is not None:
                await app.changes.wait()
    replies = [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]
    assert replies == ["answered: settle slowly"]
    assert _claims(platform, message_id) == [200]
    assert platform.stats["reopened"] == 0
