"""Identities are isolated; a terminal disconnect ends that identity's runner with its
typed reason (logged), the others go on, `GET /health` says so, and the bridge
returns by itself once every identity is gone. A graceful close lets forwards in
flight finish within the grace."""

from __future__ import annotations

import logging

import httpx2
import pytest
import trio

from band_trio.bridge import BridgePolicy
from band_trio.platform import Platform
from band_trio.testing import open_recording_target

from ._helpers import identity, running_bridge, second_agent
from .conftest import seeded


async def _health(port: int | None) -> tuple[int, dict[str, object]]:
    assert port is not None
    async with httpx2.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{port}/health")
    return response.status_code, response.json()


async def test_a_terminal_disconnect_ends_that_identity_only_and_health_says_why(
    platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    """band-bridge: a terminal disconnect was not handled; the bridge hung on while
    its health said 503 for ever."""
    first, room_id, user_id = seeded(platform)
    second, second_key, second_room = second_agent(platform)
    async with (
        open_recording_target() as target_a,
        open_recording_target() as target_b,
        running_bridge(
            [
                identity(platform, target_a.url),
                identity(platform, target_b.url, agent_id=second, api_key=second_key),
            ],
            health=("127.0.0.1", 0),
        ) as run,
    ):
        bridge = run.bridge
        status, body = await _health(bridge.health_port)
        assert status == 200 and body["healthy"] is True
        async with httpx2.AsyncClient() as client:
            elsewhere = await client.get(f"http://127.0.0.1:{bridge.health_port}/other")
            posted = await client.post(f"http://127.0.0.1:{bridge.health_port}/health")
        assert elsewhere.status_code == 404 and posted.status_code == 405
        with trio.fail_after(5), caplog.at_level(logging.ERROR, logger="band_trio.bridge"):
            platform.faults.supersede(first, reason="superseded", message="another bridge")
            await bridge.wait_until(lambda: bridge.identities[first].ended is not None)
            assert "identity" in caplog.text and "superseded" in caplog.text
            assert not run.finished.is_set()
            message_id = platform.post_message(second_room, user_id, "still bridged")
            await target_b.wait_until(lambda: message_id in target_b.message_ids())
            status, body = await _health(bridge.health_port)
            assert status == 503 and body["healthy"] is False
            by_name = {i["agent_id"]: i for i in body["identities"]}  # type: ignore[attr-defined]
            assert by_name[first]["connected"] is False
            assert by_name[first]["last_disconnect_reason"]["reason"] == "superseded"
            assert "superseded" in by_name[first]["ended"]
            assert by_name[second]["connected"] is True and by_name[second]["ended"] is None
            assert by_name[second]["threads"] == {  # a target's worker threads, counted
                "limit": 16, "running": 0, "abandoned": 0, "abandoned_running": 0
            }  # fmt: skip
            platform.faults.supersede(second)
            await run.finished.wait()  # every identity gone: run() returns by itself
        assert run.result is not None and run.result.all_lost
        assert sorted(run.result.lost) == sorted([first, second])
    assert target_a.received == []
    del room_id


async def test_a_refused_key_ends_that_identity_and_the_other_goes_on(
    platform: Platform,
) -> None:
    first, _, user_id = seeded(platform)
    second, second_key, second_room = second_agent(platform)
    async with (
        open_recording_target() as target,
        running_bridge(
            [
                identity(platform, target.url, api_key="wrong-key", name="wrong"),
                identity(platform, target.url, agent_id=second, api_key=second_key),
            ],
            wait=False,
        ) as run,
    ):
        bridge = run.bridge
        with trio.fail_after(5):
            await bridge.wait_until(lambda: bridge.identities["wrong"].ended is not None)
            assert "AuthenticationError" in (bridge.identities["wrong"].ended or "")
            await bridge.wait_until(lambda: bridge.identities[second].link_connects > 0)
            message_id = platform.post_message(second_room, user_id, "hello")
            await target.wait_until(lambda: message_id in target.message_ids())
        assert not bridge.healthy
    del first


async def test_two_identities_are_isolated(platform: Platform) -> None:
    first, room_id, user_id = seeded(platform)
    second, second_key, second_room = second_agent(platform)
    async with (
        open_recording_target() as target_a,
        open_recording_target() as target_b,
        running_bridge(
            [
                identity(platform, target_a.url),
                identity(platform, target_b.url, agent_id=second, api_key=second_key),
            ]
        ) as run,
    ):
        bridge = run.bridge
        with trio.fail_after(5):
            await bridge.wait_until(lambda: all(i.rooms_idle for i in bridge.identities.values()))
            target_a.hold = True
            held = platform.post_message(room_id, user_id, "for the first, held")
            await target_a.wait_until(lambda: held in target_a.message_ids())
            platform.send_control(first, "stop")  # agent scope, the first identity only
            await target_a.received[0].closed.wait()
            other = platform.post_message(second_room, user_id, "for the second")
            await target_b.wait_until(lambda: other in target_b.message_ids())
        assert bridge.identities[second].counters.cancelled == 0
    assert target_a.message_ids() == [held] and target_b.message_ids() == [other]
    assert {r.envelope.agent_id for r in target_b.received} == {second}


async def test_a_graceful_close_lets_a_forward_in_flight_finish(platform: Platform) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = True
            message_id = platform.post_message(room_id, user_id, "in flight at the close")
            await target.wait_until(lambda: message_id in target.message_ids())
            run.bridge.close()
            await run.bridge.wait_until(lambda: not ident.connected)
            target.release_all()
            await run.finished.wait()
        assert ident.counters.delivered == 1 and ident.ended == "closed"
        assert run.result is not None and not run.result.all_lost


async def test_past_the_shutdown_grace_a_forward_in_flight_is_cancelled(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        running_bridge(
            [identity(platform, target.url)], bridge_policy=BridgePolicy(shutdown_grace=0.05)
        ) as run,
    ):
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(5):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = True
            message_id = platform.post_message(room_id, user_id, "never finishes")
            await target.wait_until(lambda: message_id in target.message_ids())
            run.bridge.close()
            await target.received[0].closed.wait()
            await run.finished.wait()
        assert ident.counters.delivered == 0


def test_health_is_200_only_when_every_identity_is_connected() -> None:
    from band_trio.bridge import IdentityStatus, health_body

    def status(name: str, connected: bool) -> IdentityStatus:
        return IdentityStatus(
            name=name, agent_id=name, connected=connected, rooms=0, forwards_in_flight=0,
            delivered=0, failed=0, cancelled=0, dropped=0, overflowed=0, remote_stops={},
            threads={},
            last_disconnect_reason=None, ended=None,
        )  # fmt: skip

    assert health_body([status("a", True), status("b", True)])[0] == 200
    assert health_body([status("a", True), status("b", False)])[0] == 503
    assert health_body([])[0] == 503  # nothing bridged is not healthy


async def test_an_identity_that_crashes_ends_alone(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in one identity's runner (here: its target cannot be opened) ends that
    identity, logged; the other one forwards on."""
    from band_trio.bridge import _identity

    real = _identity.open_target

    async def open_target(config: object, *args: object) -> object:
        if getattr(config, "url", "").endswith("/broken"):
            raise RuntimeError("a bug while opening the target")
        return await real(config, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_identity, "open_target", open_target)
    _, _, user_id = seeded(platform)
    second, second_key, second_room = second_agent(platform)
    async with (
        open_recording_target() as target,
        running_bridge(
            [
                identity(platform, target.url + "/broken", name="broken"),
                identity(platform, target.url, agent_id=second, api_key=second_key),
            ],
            wait=False,
        ) as run,
    ):
        bridge = run.bridge
        with trio.fail_after(5):
            await bridge.wait_until(lambda: bridge.identities["broken"].ended is not None)
            assert "crashed: RuntimeError" in (bridge.identities["broken"].ended or "")
            await bridge.wait_until(lambda: bridge.identities[second].link_connects > 0)
            message_id = platform.post_message(second_room, user_id, "still here")
            await target.wait_until(lambda: message_id in target.message_ids())
