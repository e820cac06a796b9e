"""The ACP adapter against an agent built on PyPI's `agent-client-protocol` SDK (asyncio,
its own process: tests/peers/acp_agent.py), driven by a real agent on the embedded
platform. The agent records what it saw (`AgentEvents`); that a prompt was cancelled is
read on its side: it got `session/cancel` and answered the prompt `cancelled`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import trio

from band_trio import StopOutcome
from band_trio.adapters import AcpAdapter
from band_trio.platform import Platform
from peers.acp_agents import AgentEvents, Observed, events_posted, sdk_agent_config
from support import group_alive, replies, running_agent, seeded, status

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
    assert not group_alive(pid)  # the agent stopped: its process group was ended


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


async def test_stop_keeps_the_message_and_play_answers_it_in_the_same_session(
    platform: Platform, tmp_path: Path
) -> None:
    agent_id, room, user = seeded(platform)
    events = AgentEvents(tmp_path)
    adapter = Observed(sdk_agent_config(tmp_path))
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter) as running:
            message = platform.post_message(room, user, "[once] count")
            await events.wait_for(event="prompt", text="[once] count", timeout=DEADLINE)
            session = adapter.session(room)
            platform.send_control(agent_id, "stop", room_id=room, reason="not now")
            [stop] = await adapter.settled(message)
            room_state = running.agent.rooms[room]
            await running.agent.wait_until(lambda: room_state.running is None)
            assert status(platform, message) == "processing"  # kept for the play
            assert replies(platform, room) == []
            platform.send_control(agent_id, "play", room_id=room)
            await platform.wait_until(lambda: status(platform, message) == "processed")
            assert adapter.session(room) == session
    assert stop.outcome is StopOutcome.CONFIRMED
    assert replies(platform, room) == ["answered again"]
    [first, replay] = [e["text"] for e in events.all(event="prompt")]
    assert first == "[once] count"
    assert "stopped by the user (reason: not now)" in replay
    assert "answer the message again" in replay and replay.endswith("\n\n[once] count")


@pytest.mark.parametrize("loads", [True, False])
async def test_a_restarted_agent_finds_each_rooms_session_in_the_state_file(
    platform: Platform, tmp_path: Path, loads: bool
) -> None:
    """With an agent that can `session/load`, the room's session goes on; with one that
    cannot, a new session starts, given the room's recent messages."""
    _, room, user = seeded(platform)
    state = tmp_path / "state.json"
    events = AgentEvents(tmp_path)
    args = () if loads else ("--no-load",)
    with trio.fail_after(DEADLINE):
        for text in ("[quick] remember me", "[recall]"):  # two runs of the agent
            adapter = AcpAdapter(sdk_agent_config(tmp_path, *args, state_file=str(state)))
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, text)
                await platform.wait_until(lambda m=message: status(platform, m) == "processed")
    [first, second] = [e["session_id"] for e in events.all(event="prompt")]
    saved = json.loads(state.read_text())
    assert saved["agent"]["cwd"] == str(tmp_path)
    assert saved["rooms"] == {room: second}
    if loads:
        assert second == first
        assert [e["session_id"] for e in events.all(event="load_session")] == [first]
        assert replies(platform, room) == ["quick answer", "[quick] remember me | [recall]"]
    else:
        assert second != first and events.all(event="load_session") == []
        [_, recalled] = replies(platform, room)
        assert recalled.startswith("Earlier in this room:\n"), recalled
        assert ": [quick] remember me\n" in recalled and ": quick answer\n" in recalled
        assert recalled.endswith("\n\n[recall]")
