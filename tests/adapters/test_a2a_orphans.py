"""A task the peer started before the turn's first A2A request broke is never orphaned.

Over a real a2a-sdk 1.3.0 peer behind the fault proxy: the first request breaks
after the peer created its task but before the task's id reached the adapter. The
adapter looks the task up (`ListTasks`, by our `messageId`) before any retry: found,
it is followed (or stopped, after an interrupt); not knowable, the turn fails with
one WARNING and is not asked again. The peer's own event log says what ran.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

import pytest
import trio

from band_trio import Policy, UpstreamPolicy
from band_trio.adapters import A2AAdapter
from band_trio.platform import Platform
from peers import Peer, a2a_peer, fault_proxy, plan
from support import (
    early_close,
    errors_posted,
    replies,
    running_agent,
    seeded,
    settled,
    status,
    tasks_for,
)

DEADLINE = 30
FAST = Policy(
    backend_stop_grace=1.0,
    upstream=UpstreamPolicy(read_timeout=1.0, retry_base=0.05, retry_cap=0.2),
)
ANSWER = "chunk 0 chunk 1 chunk 2"
NO_LIST = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}
)


def sends(proxy: Peer, text: str) -> list[dict[str, Any]]:
    return [e for e in proxy.events("request") if e["match"] == text]


@early_close
async def test_a_send_message_cut_after_the_task_started_is_followed_not_sent_again(
    platform: Platform,
) -> None:
    """The polled path (`SendMessage`, `returnImmediately`): its answer is cut after the
    headers, the peer has the task; it is found and answered once, no second task."""
    _, room, user = seeded(platform)
    text = "mode=normal chunks=3 delay=0.05 polled cut"
    with trio.fail_after(DEADLINE):
        async with a2a_peer() as peer, fault_proxy(peer.base_url) as proxy:
            await plan(proxy, text, [{"drop_after": 0}])
            adapter = A2AAdapter(proxy.url, streaming=False, poll_interval=0.05)
            async with running_agent(platform, adapter, policy=FAST):
                message = platform.post_message(room, user, text)
                await platform.wait_until(lambda: settled(platform, message))
            ran = tasks_for(peer, text)
            ended = {e["task_id"] for e in peer.events("terminal")}
            sent = sends(proxy, text)
    assert status(platform, message) == "processed"
    assert replies(platform, room) == [ANSWER]
    assert len(sent) == 1 and len(ran) == 1
    assert set(ran) <= ended


@early_close
async def test_an_interrupt_while_the_start_breaks_cancels_the_task_it_started(
    platform: Platform,
) -> None:
    """The stream's headers came, then silence: the peer runs the task, its id never
    comes. An interrupt lands in that window (the start is shielded); the read times
    out, the lookup finds the task, and the turn's remote stop cancels it."""
    agent_id, room, user = seeded(platform)
    text = "mode=normal chunks=200 delay=0.05 window"
    policy = Policy(
        backend_stop_grace=4.0,
        upstream=UpstreamPolicy(read_timeout=1.0, retry_base=0.05, retry_cap=0.2),
    )
    with trio.fail_after(DEADLINE):
        async with a2a_peer() as peer, fault_proxy(peer.base_url) as proxy:
            await plan(proxy, text, [{"stall_after": 0}])
            adapter = A2AAdapter(proxy.url, streaming=True, poll_interval=0.05)
            async with running_agent(platform, adapter, policy=policy) as running:
                message = platform.post_message(room, user, text)
                await peer.wait_for(event="execute_started", timeout=DEADLINE)
                platform.send_control(agent_id, "interrupt", room_id=room)
                await running.agent.wait_until(lambda: running.agent.remote_stops.sent >= 1)
                stops = list(running.agent.remote_stops.recent)
                await platform.wait_until(lambda: status(platform, message) != "processing")
            ran = tasks_for(peer, text)
            cancels = [e["task_id"] for e in peer.events("cancel_request")]
            ends = {e["task_id"]: e["state"] for e in peer.events("terminal")}
            sent = sends(proxy, text)
    assert len(sent) == 1 and len(ran) == 1
    assert cancels == ran
    assert ends == {ran[0]: "TASK_STATE_CANCELED"}
    assert [(s.handle, s.outcome.value) for s in stops] == [(ran[0], "confirmed")]
    assert replies(platform, room) == []


@early_close
@pytest.mark.parametrize("protocol", ["1.0", "0.3"])
async def test_a_peer_without_list_tasks_is_reported_and_not_asked_again(
    platform: Platform, caplog: pytest.LogCaptureFixture, protocol: Literal["1.0", "0.3"]
) -> None:
    """Whether the broken request started a task cannot be known (0.3 has no ListTasks;
    a 1.0 peer answers -32601): one WARNING names the peer and the message id, the turn
    fails, and no second task is started."""
    caplog.set_level(logging.WARNING, logger="band_trio.adapters.a2a")
    _, room, user = seeded(platform)
    text = f"mode=normal chunks=3 delay=0.05 no list {protocol}"
    with trio.fail_after(DEADLINE):
        async with a2a_peer() as peer, fault_proxy(peer.base_url) as proxy:
            await plan(proxy, '"ListTasks"', [{"status": 200, "body": NO_LIST}])
            await plan(proxy, text, [{"drop_after": 0}])
            await plan(proxy, "refused", [{"status": 503, "retry_after_ms": 50}])
            adapter = A2AAdapter(proxy.url, streaming=True, protocol=protocol, poll_interval=0.05)
            async with running_agent(platform, adapter, policy=FAST):
                message = platform.post_message(room, user, text)
                await platform.wait_until(lambda: settled(platform, message))
                # a 503 says the peer did not take the request: asked again, no lookup
                again = platform.post_message(room, user, "mode=quick refused")
                await platform.wait_until(lambda: settled(platform, again))
            sent = sends(proxy, text)
            ran = tasks_for(peer, text)
            refused = (len(sends(proxy, "refused")), tasks_for(peer, "mode=quick refused"))
            [message_id] = [
                e["body"]["params"]["message"]["messageId"]
                for e in peer.events("request")
                if e["method"] in ("SendStreamingMessage", "message/stream")
                and text in json.dumps(e["body"])
            ]
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "band_trio.adapters.a2a"
    ]
    assert status(platform, message) == "failed"
    assert len(sent) == 1 and len(ran) == 1
    [warning] = warnings
    assert f"at {proxy.url} may be running a task for message {message_id}," in warning
    assert status(platform, again) == "processed" and replies(platform, room) == ["done"]
    assert refused[0] == 2 and len(refused[1]) == 1
    [error] = errors_posted(platform, room)
    assert "not asked again" in error
