"""The ACP adapter against an agent built on PyPI's `agent-client-protocol` SDK (asyncio,
its own process: tests/peers/acp_agent.py), driven by a real agent on the embedded
platform. The agent records what it saw (`AgentEvents`); that a prompt was cancelled is
read on its side: it got `session/cancel` and answered the prompt `cancelled`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from band_trio import StopOutcome
from band_trio.platform import Platform
from peers.acp_agents import AgentEvents, Observed, events_posted, sdk_agent_config
from support import replies, running_agent, seeded, status

DEADLINE = 20


async def test_answers_in_the_rooms_session_and_posts_its_tool_calls(
    platform: Platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, room, user = seeded(platform)
    monkeypatch.setenv("BAND_API_KEY", "not-for-the-agent")
    events = AgentEvents(tmp_path)
    adapter = Observed(sdk_agent_config(tmp_path))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            first = platform.post_message(room, user, "[quick] one")
            await platform.wait_until(lambda: status(platform, first) == "processed")
            session = adapter.session(room)
            second = platform.post_message(room, user, "[tool] run them")
            await platform.wait_until(lambda: status(platform, second) == "processed")
            third = platform.post_message(room, user, "[recall]")
            await platform.wait_until(lambda: status(platform, third) == "processed")
            assert adapter.session(room) == session
            pid = adapter.agent.pid
            assert pid is not None
            environ = await trio.Path(f"/proc/{pid}/environ").read_bytes()
    assert replies(platform, room)[:2] == ["quick answer", "tool done"]
    # one session holds the conversation; its first prompt carried no history (none yet)
    assert replies(platform, room)[2] == "[quick] one | [tool] run them | [recall]"
    assert events_posted(platform, room) == [
        ("tool_call", "run the tests"),
        ("tool_result", "3 passed"),
    ]
    assert adapter.stops[first] == adapter.stops[second] == ()  # ended on their own
    assert [e["session_id"] for e in events.all(event="new_session")] == [session]
    assert b"BAND_API_KEY" not in environ  # the agent's key stays the agent's


async def test_interrupt_sends_session_cancel_and_the_next_message_goes_to_the_same_session(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room, user = seeded(platform)
    events = AgentEvents(tmp_path)
    adapter = Observed(sdk_agent_config(tmp_path))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            message = platform.post_message(room, user, "[slow] count")
            await events.wait_for(event="prompt", text="[slow] count", timeout=DEADLINE)
            session = adapter.session(room)
            sent = time.perf_counter()
            platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
            cancel = await events.wait_for(event="cancel", timeout=DEADLINE)
            end = await events.wait_for(event="prompt_end", timeout=DEADLINE)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            [stop] = await adapter.settled(message)
            after = platform.post_message(room, user, "next")
            await platform.wait_until(lambda: status(platform, after) == "processed")
            assert adapter.session(room) == session
            stats = running.agent.remote_stops
    assert end["stop_reason"] == "cancelled"
    assert (stop.name, stop.outcome, stop.handle) == ("acp prompt", StopOutcome.CONFIRMED, session)
    assert stop.detail == "the prompt ended (cancelled)" and stats.confirmed == 1
    # nothing was posted for the interrupted message; the next prompt says why it was cut
    [reply] = replies(platform, room)
    assert reply.startswith("echo: [Your previous answer was interrupted by the user")
    assert "(reason: enough)" in reply and reply.endswith("\n\nnext")
    print(
        f"\ninterrupt -> session/cancel at the agent {1000 * (cancel['perf'] - sent):.1f} ms,"
        f" sent after {1000 * stop.waited:.2f} ms, stop took {1000 * stop.took:.1f} ms"
    )
