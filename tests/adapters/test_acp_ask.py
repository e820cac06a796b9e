"""The ACP adapter configured to ask (`permissions="ask"`): a `session/request_permission`
the allow-list does not grant is put to the room, over the embedded platform and a real
agent, against the SDK-built test agent (tests/peers/acp_agent.py, its own process),
which records the outcome it was answered.

People answer as on Band, mentioning the agent (`@handle allow`).
"""

from __future__ import annotations

from pathlib import Path

import trio

from band_trio import StopOutcome
from band_trio.platform import Platform
from peers.acp_agents import AgentEvents, Observed, sdk_agent_config
from support import replies, running_agent, seeded, status

DEADLINE = 20


def questions(platform: Platform, room: str) -> list[str]:
    return [r for r in replies(platform, room) if " reply with one of: " in r.split("\n")[0]]


def answer(platform: Platform, room: str, user: str, agent: str, text: str) -> str:
    handle = platform.store.agents[agent].handle
    return platform.post_message(room, user, f"@{handle} {text}", mentions=[agent])


async def test_the_room_allows_denies_lets_the_deadline_deny_and_interrupts_a_request(
    platform: Platform, tmp_path: Path
) -> None:
    agent, room, user = seeded(platform)
    events = AgentEvents(tmp_path)
    config = sdk_agent_config(
        tmp_path, permissions="ask", ask_within=1.0, allow=frozenset({"read"})
    )
    adapter = Observed(config)
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, adapter):
            # an allowed kind is granted without a question
            read = platform.post_message(room, user, "[ask read]")
            await platform.wait_until(lambda: status(platform, read) == "processed")
            assert questions(platform, room) == []
            # allow: the agent is answered with its allow_once option
            allowed = platform.post_message(room, user, "[ask execute]")
            await platform.wait_until(lambda: len(questions(platform, room)) == 1)
            yes = answer(platform, room, user, agent, "allow")
            await platform.wait_until(lambda: status(platform, allowed) == "processed")
            # deny: its reject_once option
            denied = platform.post_message(room, user, "[ask edit]")
            await platform.wait_until(lambda: len(questions(platform, room)) == 2)
            no = answer(platform, room, user, agent, "Deny.")
            await platform.wait_until(lambda: status(platform, denied) == "processed")
            # no answer within ask_within: the last choice, deny
            silent = platform.post_message(room, user, "[ask delete]")
            await platform.wait_until(lambda: status(platform, silent) == "processed")
            # an interrupt during the question cancels the turn: session/cancel, and the
            # pending request answered `cancelled`, as ACP asks of a client
            cut = platform.post_message(room, user, "[ask execute] again")
            await platform.wait_until(lambda: len(questions(platform, room)) == 4)
            platform.send_control(agent, "interrupt", room_id=room, reason="no")
            cancel = await events.wait_for(event="cancel", timeout=DEADLINE)
            [stop] = await adapter.settled(cut)
            await platform.wait_until(lambda: status(platform, cut) == "processed")
            await platform.wait_until(lambda: status(platform, yes) == "processed")
            await platform.wait_until(lambda: status(platform, no) == "processed")
            withdrawn = "withdrawn: the work was interrupted"
            await platform.wait_until(lambda: any(withdrawn in r for r in replies(platform, room)))
    outcomes = [(e["kind"], e["outcome"]) for e in events.all(event="permission")]
    assert outcomes == [
        ("read", "yes"),
        ("execute", "yes"),
        ("edit", "no"),
        ("delete", "no"),
        ("execute", "cancelled"),
    ]
    [last] = [e for e in events.all(event="permission") if e["outcome"] == "cancelled"]
    assert last["perf"] >= cancel["perf"]  # told to cancel first, then answered
    said = replies(platform, room)
    assert [r for r in said if r.startswith("asked:")] == [
        "asked: yes",
        "asked: yes",
        "asked: no",
        "asked: no",
    ]
    first = questions(platform, room)[0]
    assert "reply with one of: allow, always, deny" in first
    assert "The coding agent asks to run (execute): a execute tool" in first
    assert "always: allow it for the rest of this session" in first
    assert stop.outcome is StopOutcome.CONFIRMED
    assert adapter.stops[allowed] == ()
