"""The host as an attacker reaches it, and the answers it owes the bridge.

A local process (or a web page) that can reach `band-trio host` must not run
turns: every forward needs the host's token, checked before the body is read,
and a refusal names nothing. A forward with the right token is still only a
pointer: the adapter runs on the message as the platform holds it. And a turn
that did not run — the claim refused, the room stopped, the adapter failed —
is never answered 2xx, so the bridge never counts it delivered.
"""

from __future__ import annotations

import httpx2
import pytest
import trio

from band_trio import Adapter, AuthenticationError, Turn
from band_trio.bridge import BridgePolicy, HttpTargetConfig
from band_trio.platform import Platform
from support import HOST_TOKEN, envelope

from ._helpers import identity, running_bridge, running_host
from .conftest import seeded

DEADLINE = 10
BEARER = {"authorization": f"Bearer {HOST_TOKEN}"}


class Echo(Adapter):
    """Answers what the platform's copy of the message says; records each call."""

    def __init__(self, *, fail: bool = False) -> None:
        self.seen: list[tuple[str, str, str]] = []
        self.fail = fail

    async def on_turn(self, turn: Turn) -> None:
        message = turn.message
        self.seen.append((message.id, message.sender_id, message.content))
        if self.fail:
            raise RuntimeError("the adapter broke")
        await turn.reply(f"echo: {message.content}")


def status(platform: Platform, message_id: str) -> str:
    agent_id = platform.info.agent_id or ""
    return str(platform.delivery(message_id)[agent_id]["status"])


def replies(platform: Platform) -> list[str]:
    agent_id, room_id, _ = seeded(platform)
    return [m.content for m in platform.messages(room_id) if m.sender_id == agent_id]


async def test_a_forged_envelope_without_the_token_runs_nothing_and_names_nothing(
    platform: Platform,
) -> None:
    """The issue's attack: a `text/plain` POST from another origin, then the same
    forgery as a local process would send it (no token, a wrong one, two)."""
    agent_id, _, user_id = seeded(platform)
    adapter = Echo()
    real = platform.post_message(seeded(platform)[1], user_id, "what is 3+3?")
    forged = envelope(platform, real, "ATTACKER-CHOSEN TEXT")
    async with running_host(platform, adapter) as (app, url), httpx2.AsyncClient() as client:
        with trio.fail_after(DEADLINE):
            page = await client.post(
                url,
                content=httpx2.Request("POST", url, json=forged).content,
                headers={"content-type": "text/plain", "origin": "http://evil.example"},
            )
            answers = [
                await client.post(url, json=forged),
                await client.post(url, json=forged, headers={"authorization": "Bearer wrong"}),
                await client.post(url, json=forged, headers={"authorization": HOST_TOKEN}),
                await client.post(
                    url,
                    json=forged,
                    headers=[("authorization", "Bearer wrong"), *BEARER.items()],
                ),
                await client.post(url, json={**forged, "agent_id": "guess"}),
            ]
            health = await client.get(f"{url}health")
    assert page.status_code == 403
    for answer in answers:
        assert answer.status_code == 401
        assert answer.json() == {
            "error": {"code": "unauthorized", "message": "missing or wrong bearer token"}
        }
        assert agent_id not in answer.text
    assert health.json() == {"ok": True}  # the counts are for the token's holder
    assert adapter.seen == [] and app.turns == 0 and app.refused == len(answers)
    assert status(platform, real) == "delivered" and replies(platform) == []


async def test_the_token_is_checked_before_any_of_the_body_is_read(platform: Platform) -> None:
    async with running_host(platform, Echo()) as (_, url):
        port = int(url.rsplit(":", 1)[1].strip("/"))
        with trio.fail_after(DEADLINE):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(
                    b"POST / HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
                    b"content-length: 100000000\r\n\r\n" % port
                )  # ...and the 100 MB never come: the 401 must not wait for them
                answer = b""
                while b"\r\n\r\n" not in answer:
                    chunk = await stream.receive_some()
                    assert chunk, answer
                    answer += chunk
    assert answer.startswith(b"HTTP/1.1 401")
    assert b"connection: close" in answer.lower()


async def test_the_right_token_with_forged_content_runs_nothing(platform: Platform) -> None:
    _, room_id, user_id = seeded(platform)
    adapter = Echo()
    real = platform.post_message(room_id, user_id, "what is 3+3?")
    async with (
        running_host(platform, adapter) as (_, url),
        httpx2.AsyncClient(headers=BEARER) as client,
    ):
        with trio.fail_after(DEADLINE):
            forged = await client.post(url, json=envelope(platform, real, "ATTACKER-CHOSEN"))
            invented = await client.post(url, json=envelope(platform, "no-such-id", "x"))
            assert adapter.seen == [] and status(platform, real) == "delivered"
            true = await client.post(url, json=envelope(platform, real, "what is 3+3?"))
    assert (forged.status_code, forged.json()) == (422, {"outcome": "mismatch"})
    assert (invented.status_code, invented.json()) == (404, {"outcome": "unknown"})
    assert true.json() == {"outcome": "processed"}
    assert adapter.seen == [(real, user_id, "what is 3+3?")]  # the platform's copy
    assert replies(platform) == ["echo: what is 3+3?"]


async def test_a_message_of_another_room_or_sender_is_not_the_platforms(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    other_room = platform.create_room("other", [user_id, agent_id]).id or ""
    adapter = Echo()
    real = platform.post_message(room_id, user_id, "hi")
    someone = platform.create_user(name="Mallory").id or ""
    platform.add_participant(room_id, someone)
    async with (
        running_host(platform, adapter) as (_, url),
        httpx2.AsyncClient(headers=BEARER) as client,
    ):
        with trio.fail_after(DEADLINE):
            moved = await client.post(url, json=envelope(platform, real, "hi", room_id=other_room))
            posed = envelope(platform, real, "hi")
            posed["payload"]["sender_id"] = someone
            impostor = await client.post(url, json=posed)
    assert moved.json() == {"outcome": "unknown"}
    assert impostor.json() == {"outcome": "mismatch"}
    assert adapter.seen == [] and status(platform, real) == "delivered"


async def test_a_stopped_room_is_answered_423_and_nothing_runs(platform: Platform) -> None:
    agent_id, room_id, user_id = seeded(platform)
    adapter = Echo()
    message_id = platform.post_message(room_id, user_id, "hold on")
    platform.send_control(agent_id, "stop", room_id=room_id)
    async with (
        running_host(platform, adapter) as (app, url),
        httpx2.AsyncClient(headers=BEARER) as client,
    ):
        with trio.fail_after(DEADLINE):
            stopped = await client.post(url, json=envelope(platform, message_id, "hold on"))
            platform.send_control(agent_id, "play", room_id=room_id)
            played = await client.post(url, json=envelope(platform, message_id, "hold on"))
    assert (stopped.status_code, stopped.json()) == (423, {"outcome": "stopped"})
    assert played.json() == {"outcome": "processed"}
    assert adapter.seen == [(message_id, user_id, "hold on")]  # once, after the play
    assert app.outcomes == {"stopped": 1, "processed": 1}


async def test_a_refused_claim_is_502_and_a_failed_turn_422(platform: Platform) -> None:
    _, room_id, user_id = seeded(platform)
    first = platform.post_message(room_id, user_id, "one")
    second = platform.post_message(room_id, user_id, "two")
    adapter = Echo(fail=True)
    async with (
        running_host(platform, adapter) as (_, url),
        httpx2.AsyncClient(headers=BEARER) as client,
    ):
        with trio.fail_after(DEADLINE):
            platform.faults.fail_rest("processing", 401, message_id=first)
            refused = await client.post(url, json=envelope(platform, first, "one"))
            assert adapter.seen == [] and status(platform, first) == "delivered"
            failed = await client.post(url, json=envelope(platform, second, "two"))
            again = await client.post(url, json=envelope(platform, second, "two"))
    assert (refused.status_code, refused.json()) == (502, {"outcome": "not_claimed"})
    assert (failed.status_code, failed.json()) == (422, {"outcome": "failed"})
    assert status(platform, second) == "failed"
    assert again.json() == {"outcome": "exhausted"}  # never run twice
    assert [call[0] for call in adapter.seen] == [second]


async def test_a_refused_key_stops_the_host_before_it_serves(platform: Platform) -> None:
    with pytest.RaisesGroup(AuthenticationError, flatten_subgroups=True), trio.fail_after(DEADLINE):
        async with running_host(platform, Echo(), api_key="not-the-key"):
            pytest.fail("the host served with a refused key")


async def test_the_host_keeps_at_most_host_rooms_ledgers(platform: Platform) -> None:
    agent_id, _, user_id = seeded(platform)
    rooms = [platform.create_room(f"r{i}", [user_id, agent_id]).id or "" for i in range(5)]
    adapter = Echo()
    policy = BridgePolicy(host_rooms=2)
    async with (
        running_host(platform, adapter, bridge_policy=policy) as (app, url),
        httpx2.AsyncClient(headers=BEARER) as client,
    ):
        with trio.fail_after(DEADLINE):
            for room in rooms:
                message_id = platform.post_message(room, user_id, f"in {room}")
                answer = await client.post(
                    url, json=envelope(platform, message_id, f"in {room}", room_id=room)
                )
                assert answer.json() == {"outcome": "processed"}
                assert len(app.rooms) <= 2
            again = await client.post(
                url, json=envelope(platform, message_id, f"in {rooms[-1]}", room_id=rooms[-1])
            )
            first = platform.messages(rooms[0])[0].id
            forgotten = await client.post(
                url, json=envelope(platform, first, f"in {rooms[0]}", room_id=rooms[0])
            )
    assert app.rooms.dropped == 4  # r0, r1, r2, then r3 when r0 came back
    assert again.json() == {"outcome": "completed"}  # a room still kept: its ledger
    assert forgotten.json() == {"outcome": "unknown"}  # dropped, but processed on the platform
    assert len(adapter.seen) == 5


async def test_the_bridge_counts_a_turn_the_host_did_not_run_as_failed_and_retries(
    platform: Platform,
) -> None:
    """The issue's data loss: a host that cannot claim (here: the bridge has the wrong
    token) used to answer 200 and the bridge counted the message delivered."""
    agent_id, room_id, user_id = seeded(platform)
    adapter = Echo()
    fast = BridgePolicy(retry_first=0.05, retry_max=0.05)
    async with running_host(platform, adapter) as (app, url):
        wrong = HttpTargetConfig(url=url, settle="target", token="x" * 20)
        async with running_bridge([identity(platform, wrong)], bridge_policy=fast) as run:
            counters = run.bridge.identities[agent_id].counters
            with trio.fail_after(DEADLINE):
                message_id = platform.post_message(room_id, user_id, "anyone?")
                await run.bridge.wait_until(lambda: counters.failed >= 2)  # retried
                (health,) = run.bridge.statuses()
        assert counters.delivered == 0 and health.delivered == 0 and health.failed >= 2
        assert app.refused >= 2 and adapter.seen == []
        assert status(platform, message_id) == "delivered"
        right = HttpTargetConfig(url=url, settle="target", token=HOST_TOKEN)
        async with running_bridge([identity(platform, right)], bridge_policy=fast) as run:
            with trio.fail_after(DEADLINE):
                await platform.wait_until(lambda: status(platform, message_id) == "processed")
                counters = run.bridge.identities[agent_id].counters
                await run.bridge.wait_until(lambda: counters.delivered == 1)
    assert adapter.seen == [(message_id, user_id, "anyone?")]
    assert replies(platform) == ["echo: anyone?"]


async def test_a_host_without_a_token_serves_anyone_who_reaches_it(platform: Platform) -> None:
    """`--insecure-no-token`: the library's `token=None`, for loopback development."""
    _, room_id, user_id = seeded(platform)
    message_id = platform.post_message(room_id, user_id, "dev")
    async with (
        running_host(platform, Echo(), token=None) as (_, url),
        httpx2.AsyncClient() as client,
    ):
        with trio.fail_after(DEADLINE):
            answer = await client.post(url, json=envelope(platform, message_id, "dev"))
    assert answer.json() == {"outcome": "processed"}


@pytest.mark.parametrize("host_rooms", [0, -1])
def test_the_host_policy_is_checked(host_rooms: int) -> None:
    with pytest.raises(ValueError, match="host_rooms"):
        BridgePolicy(host_rooms=host_rooms)
