"""The ACP adapter against OpenCode 1.18.33 (`opencode acp`), with stubllm as its model, driven
by a real agent on the embedded platform: an agent whose ACP side the project did not
write. That the prompt really stopped is read on stubllm's side: OpenCode closed the
model stream (`stream_cancelled`) after the adapter's `session/cancel`.

One test, for the suite's time (OpenCode takes a second or two to start): the rest of
the adapter's behaviour is held against the SDK-built agent (test_acp.py,
test_acp_faults.py), and the conformance kit runs against OpenCode
(tests/kit/test_reference_adapters_conform.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from band_trio import StopOutcome
from band_trio.platform import Platform
from peers import Peer, shared_stubllm_peer
from peers.acp_agents import Observed, events_posted, opencode_acp_config
from support import replies, rooms_with_the_agent, running_agent, seeded, settled, status

DEADLINE = 90  # OpenCode's start (1.4 s here, more under load) and a slow answer included
SLOW = " ".join(f"w{i:02d}" for i in range(80))  # the "[slow]" fixture's answer


def chat_requests(llm: Peer) -> list[dict[str, object]]:
    return [e["body"] for e in llm.events("request") if e["path"] == "/v1/chat/completions"]


@pytest.mark.timeout(120)  # past the test's own deadline: the peers are stopped first
@pytest.mark.long(11)
async def test_opencode_answers_refuses_a_tool_and_stops_at_session_cancel(
    platform: Platform,
) -> None:
    agent_id, _, user = seeded(platform)
    [room, other] = rooms_with_the_agent(platform, 2)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer(chunk_delay_ms=50) as llm:
            with opencode_acp_config(llm) as config:
                made = Path(config.working_directory) / "made-by-the-model"
                adapter = Observed(config)
                async with running_agent(platform, adapter) as running:
                    quick = platform.post_message(room, user, "[quick] hi")
                    await platform.wait_until(lambda: status(platform, quick) == "processed")
                    session = adapter.session(room)
                    slow = platform.post_message(room, user, "[slow] count")
                    started = await llm.wait_for(
                        lambda e: e["fixture"] == "slow", timeout=DEADLINE, event="match"
                    )
                    await llm.wait_for(
                        lambda e: e["req"] == started["req"] and e["count"] >= 3,
                        timeout=DEADLINE,
                        event="chunk",
                    )
                    sent = time.perf_counter()
                    platform.send_control(agent_id, "interrupt", room_id=room)
                    cancelled = await llm.wait_for(event="stream_cancelled", timeout=DEADLINE)
                    [stop] = await adapter.settled(slow)
                    await platform.wait_until(lambda: status(platform, slow) == "processed")
                    after = platform.post_message(room, user, "[quick] next")
                    await platform.wait_until(lambda: settled(platform, after))
                    assert adapter.session(room) == session
                    # another room, another session: OpenCode asks to run `touch`; refused
                    shell = platform.post_message(other, user, "[shell] make a file")
                    await platform.wait_until(lambda: settled(platform, shell))
                    assert adapter.session(other) not in (None, session)
                    stats = running.agent.remote_stops
                assert not made.exists()
                requests = chat_requests(llm)
    assert cancelled["req"] == started["req"] and cancelled["count"] < 80
    assert (stop.name, stop.outcome, stop.handle) == ("acp prompt", StopOutcome.CONFIRMED, session)
    assert stop.detail == "the prompt ended (cancelled)" and stats.confirmed == 1
    # the next message goes to the same session (stubllm matches "[slow]" anywhere in the
    # conversation: the slow answer, this time whole)
    assert replies(platform, room) == ["quick answer", SLOW]
    assert replies(platform, other) == [
        "(The agent ended its turn without a message. Its tool calls: "
        "touch made-by-the-model (failed).)"
    ]
    # the tool call, as the room saw it: started, then failed with OpenCode's words
    [(_, started_as), (_, ended_as)] = events_posted(platform, other)
    assert started_as == "bash" and "rejected permission" in ended_as
    assert len(requests) >= 4  # the model was asked for each prompt (and a title)
    print(
        f"\ninterrupt -> stubllm stream cancelled {1000 * (cancelled['perf'] - sent):.1f} ms,"
        f" session/cancel sent after {1000 * stop.waited:.2f} ms,"
        f" answered cancelled {1000 * stop.took:.1f} ms later"
    )
