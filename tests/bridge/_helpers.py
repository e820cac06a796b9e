"""Helpers for the bridge tests: a config for the platform's agents, a bridge run for
the length of a block with its live tasks counted."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from band_trio import Adapter, Policy, UpstreamPolicy
from band_trio.bridge import (
    Bridge,
    BridgeConfig,
    BridgePolicy,
    BridgeResult,
    HttpTargetConfig,
    IdentityConfig,
)
from band_trio.bridge._config import TargetConfig
from band_trio.host import HostApp, serve_host
from band_trio.platform import Platform
from band_trio.testing import TaskTracker
from support import HOST_TOKEN

FAST = Policy(
    reconnect_base=0.02,
    reconnect_cap=0.1,
    join_retry_base=0.02,
    upstream=UpstreamPolicy(attempts=1),
)
"""Reconnects within tens of milliseconds: the tests wait for events, not for clocks.
One attempt per forward: what these tests count is the bridge's own retries of a
failed forward (a target's retries within one forward are tested on their own)."""


def identity(
    platform: Platform,
    target: TargetConfig | str,
    *,
    agent_id: str | None = None,
    api_key: str | None = None,
    name: str | None = None,
) -> IdentityConfig:
    info = platform.info
    agent_id = agent_id or info.agent_id
    api_key = api_key or info.api_key
    assert agent_id and api_key
    if isinstance(target, str):
        target = HttpTargetConfig(url=target)
    return IdentityConfig(
        name=name or agent_id,
        agent_id=agent_id,
        api_key=api_key,
        rest_url=info.rest_url,
        ws_url=info.ws_url,
        target=target,
    )


class Run:
    """A bridge run in the background: the bridge, its result once it returned."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.tasks = TaskTracker()
        self.result: BridgeResult | None = None
        self.finished = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None]) -> None:
        self.tasks.adopt()
        try:
            self.result = await self.bridge.run(task_status=task_status)
        finally:
            self.finished.set()

    async def connected(self) -> None:
        """Until every identity is connected and has joined its rooms."""
        bridge = self.bridge
        await bridge.wait_until(
            lambda: all(
                i.connected and i.rooms is not None and i.link_connects > 0
                for i in bridge.identities.values()
            )
        )


@asynccontextmanager
async def running_bridge(
    identities: Sequence[IdentityConfig],
    *,
    policy: Policy = FAST,
    bridge_policy: BridgePolicy | None = None,
    health: tuple[str, int] | None = None,
    wait: bool = True,
    **kwargs: Any,
) -> AsyncIterator[Run]:
    """Run a bridge for the block (connected first, unless `wait` is False); on exit
    close it, wait for it, and check that no task it started outlived it."""
    bridge = Bridge(
        BridgeConfig(tuple(identities), health), policy=policy, bridge_policy=bridge_policy
    )
    handle = Run(bridge)
    trio.lowlevel.add_instrument(handle.tasks)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(handle.run)
            if wait:
                with trio.fail_after(10):
                    await handle.connected()
            try:
                yield handle
            finally:
                with trio.fail_after(10):
                    bridge.close()
                    await handle.finished.wait()
    finally:
        trio.lowlevel.remove_instrument(handle.tasks)
    assert handle.tasks.root_exited
    assert handle.tasks.living == set(), f"tasks outlived the bridge: {handle.tasks.living}"


def second_agent(platform: Platform, room_title: str = "second") -> tuple[str, str, str]:
    """A second agent in a room of its own with the seeded user: (agent, key, room)."""
    info = platform.info
    assert info.user_id
    handle = platform.store.handles.free("second")  # a handle names one agent: second-2, ...
    agent = platform.create_agent(name="Second", handle=handle, description="a second agent")
    room = platform.create_room(room_title, [info.user_id, agent.id])
    assert agent.api_key and room.id
    return agent.id, agent.api_key, room.id


@asynccontextmanager
async def running_host(
    platform: Platform,
    adapter: Adapter,
    *,
    token: str | None = HOST_TOKEN,
    policy: Policy | None = None,
    bridge_policy: BridgePolicy | None = None,
    api_key: str | None = None,
) -> AsyncIterator[tuple[HostApp, str]]:
    """`serve_host` for the block, as the platform's seeded agent (its key unless
    `api_key`); yields the app and its URL, and checks no task outlived it."""
    info = platform.info
    assert info.agent_id and info.api_key
    app = HostApp(
        adapter,
        agent_id=info.agent_id,
        token=token,
        policy=policy,
        bridge_policy=bridge_policy,
    )
    stop = trio.Event()
    tasks = TaskTracker()
    trio.lowlevel.add_instrument(tasks)
    try:
        async with trio.open_nursery() as nursery:

            async def host(*, task_status: trio.TaskStatus[int]) -> None:
                tasks.adopt()
                await serve_host(
                    app,
                    api_key=api_key or info.api_key or "",
                    rest_url=info.rest_url,
                    host="127.0.0.1",
                    port=0,
                    stop=stop,
                    task_status=task_status,
                )

            port = await nursery.start(host)
            try:
                yield app, f"http://127.0.0.1:{port}/"
            finally:
                stop.set()
    finally:
        trio.lowlevel.remove_instrument(tasks)
    assert tasks.living == set(), f"tasks outlived the host: {tasks.living}"
