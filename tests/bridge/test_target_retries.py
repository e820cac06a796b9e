"""An HTTP target's transient faults are asked again within one forward (`call_upstream`),
under the same rules as the adapters: Retry-After honoured, an answer status never
retried, the wait cancelled by an interrupt. The faults come from the project's
fault-injecting proxy in front of a real recording target."""

from __future__ import annotations

import itertools

import trio

from band_trio import Policy, UpstreamPolicy
from band_trio.platform import Platform
from band_trio.testing import open_recording_target
from peers import fault_proxy, plan

from ._helpers import FAST, identity, running_bridge
from .conftest import seeded

RETRYING = Policy(
    reconnect_base=FAST.reconnect_base,
    reconnect_cap=FAST.reconnect_cap,
    join_retry_base=FAST.join_retry_base,
    upstream=UpstreamPolicy(retry_base=0.01, retry_cap=0.05),
)


async def test_a_503_is_asked_again_after_its_retry_after_within_one_forward(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        fault_proxy(target.url) as proxy,
        running_bridge([identity(platform, proxy.base_url + "/")], policy=RETRYING) as run,
    ):
        await plan(proxy, "once refused", [{"status": 503, "retry_after_ms": 300}] * 2)
        await plan(proxy, "not for us", [{"status": 400}])
        ident = run.bridge.identities[agent_id]
        taken = platform.post_message(room_id, user_id, "once refused")
        with trio.fail_after(10):
            await target.wait_until(lambda: taken in target.message_ids())
            refused = platform.post_message(room_id, user_id, "not for us")
            await run.bridge.wait_until(lambda: ident.counters.failed == 1)
        attempts = [e for e in proxy.events("request") if e["match"] == "once refused"]
        denied = [e for e in proxy.events("request") if e["match"] == "not for us"]
    assert len(attempts) == 3 and ident.counters.delivered == 1
    times = [e["perf"] for e in attempts]
    assert all(b - a >= 0.3 for a, b in itertools.pairwise(times)), times
    assert len(denied) == 1  # a 400 is the answer: the forward failed at once
    assert refused not in target.message_ids()


async def test_an_interrupt_during_the_targets_backoff_cancels_the_forward(
    platform: Platform,
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    async with (
        open_recording_target() as target,
        fault_proxy(target.url) as proxy,
        running_bridge([identity(platform, proxy.base_url + "/")], policy=RETRYING) as run,
    ):
        await plan(proxy, "wait for it", [{"status": 503, "retry_after": "20"}])
        ident = run.bridge.identities[agent_id]
        with trio.fail_after(10):
            message = platform.post_message(room_id, user_id, "wait for it")
            await proxy.wait_for(event="response_end", how="injected", timeout=10)
            await trio.testing.wait_all_tasks_blocked(0.05)  # asleep in the backoff
            platform.send_control(agent_id, "interrupt", room_id=room_id)
            await run.bridge.wait_until(lambda: ident.counters.cancelled >= 1)
        attempts = [e for e in proxy.events("request") if e["match"] == "wait for it"]
    assert len(attempts) == 1 and message not in target.message_ids()
