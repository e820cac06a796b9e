"""Serving, shutdown, durability and the ready file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx2
import pytest
import trio
from platform_client import DEADLINE, join, ws_connect
from trio_websocket import ConnectionClosed

from band_trio.errors import ConfigurationError
from band_trio.platform import Platform, open_platform, run_platform


async def test_no_tasks_left_after_close() -> None:
    baseline = trio.lowlevel.current_statistics().tasks_living
    async with open_platform() as platform:
        info = platform.info
        async with (
            httpx2.AsyncClient(
                base_url=info.rest_url, headers={"X-API-Key": info.api_key or ""}
            ) as c,
            ws_connect(platform) as ws,
        ):
            await join(ws, "1", f"agent_control:{info.agent_id}")
            assert (await c.get("/api/v1/agent/me")).status_code == 200
        assert trio.lowlevel.current_statistics().tasks_living > baseline
    assert trio.lowlevel.current_statistics().tasks_living == baseline
    with pytest.raises(RuntimeError):
        platform.info  # noqa: B018 - not serving any more


async def test_shutdown_closes_live_sockets_with_1001() -> None:
    baseline = trio.lowlevel.current_statistics().tasks_living
    codes: list[int] = []
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery, open_platform() as platform:

            async def client(task_status: trio.TaskStatus[None]) -> None:
                async with ws_connect(platform) as ws:
                    await join(ws, "1", f"agent_control:{platform.info.agent_id}")
                    task_status.started()
                    with pytest.raises(ConnectionClosed) as closed:
                        await ws.get_message()
                    codes.append(closed.value.reason.code)

            await nursery.start(client)
            # Leaving open_platform with the socket still open.
    assert codes == [1001]
    assert trio.lowlevel.current_statistics().tasks_living == baseline


async def test_cancelled_run_platform_shuts_down(tmp_path: Path) -> None:
    baseline = trio.lowlevel.current_statistics().tasks_living
    ready = tmp_path / "ready.json"
    with trio.fail_after(DEADLINE):
        async with trio.open_nursery() as nursery:
            platform: Platform = await nursery.start(
                lambda task_status: run_platform(
                    host="127.0.0.1", port=0, db=None, seed=True, ready_file=ready,
                    task_status=task_status,
                )
            )  # fmt: skip
            data = json.loads(await trio.Path(ready).read_text())
            assert data["pid"] == os.getpid()
            for key in (
                "rest_url",
                "ws_url",
                "admin_url",
                "agent_id",
                "api_key",
                "room_id",
                "user_id",
            ):
                assert data[key] == getattr(platform.info, key)
            assert [p.name for p in await trio.Path(tmp_path).iterdir()] == ["ready.json"]
            async with httpx2.AsyncClient(base_url=data["admin_url"]) as admin:
                assert (await admin.get("/stats")).status_code == 200
            nursery.cancel_scope.cancel()
    assert trio.lowlevel.current_statistics().tasks_living == baseline


async def test_loopback_only() -> None:
    with pytest.raises(ConfigurationError):
        async with open_platform(host="0.0.0.0"):
            pass


async def test_unseeded_platform_has_no_ids() -> None:
    async with open_platform(seed=False) as platform:
        assert platform.info.agent_id is None
        assert platform.info.api_key is None
        assert platform.store.agents == {}


async def test_state_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "band.db"
    async with open_platform(db=db) as platform:
        info = platform.info
        agent, room, user = info.agent_id or "", info.room_id or "", info.user_id or ""
        extra = platform.create_agent(name="Extra", handle="extra")
        platform.add_participant(room, extra.id or "")
        done = platform.post_message(room, user, "done")
        waiting = platform.post_message(room, user, "waiting")
        async with httpx2.AsyncClient(
            base_url=info.rest_url, headers={"X-API-Key": info.api_key or ""}
        ) as c:
            mark = f"/api/v1/agent/chats/{room}/messages"
            await c.post(f"{mark}/{done}/processing")
            await c.post(f"{mark}/{done}/processed")
            await c.post(f"{mark}/{waiting}/processing")
        platform.send_control(agent, "stop", room_id=room)
        before = (platform.messages(room), platform.delivery(done), platform.delivery(waiting))

    async with open_platform(db=db) as again:
        assert (again.info.agent_id, again.info.api_key) == (agent, info.api_key)
        assert (again.info.room_id, again.info.user_id) == (room, user)
        assert (again.messages(room), again.delivery(done), again.delivery(waiting)) == before
        assert again.delivery(waiting)[agent] == {"status": "processing", "attempts": 1}
        assert again.store.participants(room) == [user, agent, extra.id]
        assert again.store.agents[extra.id or ""].handle == "extra"
        assert again.store.is_stopped(agent, room)
        async with httpx2.AsyncClient(
            base_url=again.info.rest_url, headers={"X-API-Key": info.api_key or ""}
        ) as c:
            assert (await c.get(f"/api/v1/agent/chats/{room}/messages/next")).status_code == 204
            again.send_control(agent, "play", room_id=room)
            nxt = await c.get(f"/api/v1/agent/chats/{room}/messages/next")
            assert nxt.json()["data"]["id"] == waiting
            claim = await c.post(f"/api/v1/agent/chats/{room}/messages/{waiting}/processing")
            assert claim.json()["data"]["attempt_number"] == 1
