"""OpenCode's permission requests asked in the room, and guidance passed on mid-run, against
a real `opencode serve` 1.18.33 whose config says `"bash": "ask"`, with stubllm as its model
(`[shell]`: the model asks for `bash` `touch made-by-the-model`), driven by a real agent.

The room answers as people do on Band, mentioning the agent (`@handle allow`). What OpenCode
did is read on its side: the file the tool makes, the tool result the model was sent next
(stubllm's record), its pending permission requests (`GET /permission`).

One test every run (asked, allowed, with guidance sent during the wait: some 9 s, most of
it OpenCode's start and exit); the other answers — denied, unanswered (the default at the
deadline), `always`, an interrupt during the wait, `BAND_OPENCODE_PERMISSIONS=deny` — are
one case a run, rotated daily.
"""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
import trio
from test_opencode import DEADLINE, adapter_for, chat_requests, said

from band_trio import Policy, StopOutcome, WhileBusy
from band_trio.adapters._opencode_permissions import check_mode, question
from band_trio.errors import ConfigurationError
from band_trio.platform import Platform
from peers import shared_stubllm_peer
from peers.fixtures import POLL_INTERVAL
from peers.opencode import OpenCodePeer, opencode_peer
from support import claims, replies, running_agent, seeded, status

ASK = {"bash": "ask"}
GUIDANCE = "Alice added, while you were working on this: name it carefully"


def questions(platform: Platform, room: str) -> list[str]:
    return [r for r in replies(platform, room) if "reply with one of" in r]


def answer(platform: Platform, room: str, user: str, agent: str, text: str) -> str:
    handle = platform.store.agents[agent].handle
    return platform.post_message(room, user, f"@{handle} {text}", mentions=[agent])


async def opencode_get(peer: OpenCodePeer, path: str) -> Any:
    async with httpx2.AsyncClient(base_url=peer.url, auth=peer.auth) as client:
        response = await client.get(path)
        response.raise_for_status()
        return response.json()


async def opencode_has_user_message(peer: OpenCodePeer, session: str, text: str) -> None:
    """Until OpenCode has stored a user message with `text` in the session (polled)."""
    while True:
        for message in await opencode_get(peer, f"/session/{session}/message"):
            parts = message.get("parts") or []
            if message["info"]["role"] == "user" and any(p.get("text") == text for p in parts):
                return
        await trio.sleep(POLL_INTERVAL)


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.long(10)
async def test_a_permission_is_asked_allowed_and_guidance_reaches_the_next_model_call(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with (
            shared_stubllm_peer() as llm,
            opencode_peer(llm.base_url, permission=ASK) as peer,
        ):
            adapter = adapter_for(peer)
            made = peer.project / "made-by-the-model"
            async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
                shell = platform.post_message(room, user, "[shell] make a file", mentions=[agent])
                await platform.wait_until(lambda: len(questions(platform, room)) == 1)
                assert not made.exists()  # OpenCode waits for the answer
                hint = platform.post_message(room, user, "name it carefully", mentions=[agent])
                await platform.wait_until(lambda: claims(platform, hint) == 1)  # taken
                session = adapter.session(room) or ""
                await opencode_has_user_message(peer, session, GUIDANCE)
                allowed = answer(platform, room, user, agent, "allow")
                await platform.wait_until(lambda: status(platform, shell) == "processed")
                await platform.wait_until(lambda: status(platform, hint) == "processed")
                await platform.wait_until(lambda: status(platform, allowed) == "processed")
            pending = await opencode_get(peer, "/permission")
            first, second = chat_requests(llm)
            assert made.exists()
    [asked] = questions(platform, room)
    assert "reply with one of: allow, always, deny" in asked
    assert asked.endswith(
        "OpenCode asks to use bash: touch made-by-the-model\nallow: this once; "
        "always: also touch * from now on, unasked; deny: refuse it."
    )
    assert said(first, "user") == ["[shell] make a file"]
    # the guidance reached the model call after the tool's result, as a user message
    assert tool_results(second) == ["(no output)"]
    assert said(second, "user") == ["[shell] make a file", GUIDANCE]
    assert second["messages"][-1]["role"] == "user"
    assert replies(platform, room) == [asked, "the shell tool answered"]  # one answer, one turn
    assert pending == []


@pytest.mark.long(10)
@pytest.mark.rotated
@pytest.mark.parametrize("how", ["deny", "unanswered", "always", "interrupt", "configured"])
async def test_a_permission_answered_otherwise(platform: Platform, how: str) -> None:
    agent, room, user = seeded(platform)
    policy = Policy(ask_timeout=1.0 if how == "unanswered" else 30.0)
    with trio.fail_after(DEADLINE):
        async with (
            shared_stubllm_peer() as llm,
            opencode_peer(llm.base_url, permission=ASK) as peer,
        ):
            adapter = adapter_for(peer, permissions="deny" if how == "configured" else "ask")
            made = peer.project / "made-by-the-model"
            async with running_agent(platform, adapter, policy=policy):
                shell = platform.post_message(room, user, "[shell] make a file", mentions=[agent])
                if how != "configured":  # BAND_OPENCODE_PERMISSIONS=deny: refused unasked
                    await platform.wait_until(lambda: len(questions(platform, room)) == 1)
                if how in ("deny", "always"):
                    answer(platform, room, user, agent, how.capitalize() + ".")
                elif how == "interrupt":
                    platform.send_control(agent, "interrupt", room_id=room, reason="not that")
                await platform.wait_until(lambda: status(platform, shell) == "processed")
                if how == "interrupt":
                    await platform.wait_until(
                        lambda: any("withdrawn" in r for r in replies(platform, room))
                    )
                if how == "always":  # the same command again: OpenCode no longer asks
                    again = platform.post_message(room, user, "[shell] again", mentions=[agent])
                    await platform.wait_until(lambda: status(platform, again) == "processed")
                stops = await adapter.settled(shell)
            pending = await opencode_get(peer, "/permission")
            requests = chat_requests(llm)
            said_in_room = replies(platform, room)
            made_it = made.exists()
    assert pending == []  # answered, or refused by the stop after the abort
    assert len(questions(platform, room)) == (how != "configured")
    if how == "always":
        assert made_it
        assert said_in_room[-2:] == ["the shell tool answered"] * 2
        return
    assert not made_it
    if how == "interrupt":
        [stop] = stops
        assert (stop.outcome, stop.detail) == (
            StopOutcome.CONFIRMED,
            "session.error MessageAbortedError",
        )
        assert len(requests) == 1  # the model was not asked again
        assert any("withdrawn" in r for r in said_in_room)
        return
    # refused with a message: the model reads it and goes on
    [refused] = tool_results(requests[-1])
    assert "rejected permission" in refused
    if how == "configured":
        assert "This agent's operator refuses such requests." in refused
    else:
        assert "The person asked in the room refused it (or did not answer in time)." in refused
    assert said_in_room[-1] == "the shell tool answered"
    if how == "unanswered":
        assert any("withdrawn" in r or "deny" in r for r in said_in_room[1:-1])


def test_the_question_names_the_tool_and_what_it_would_do_shortened() -> None:
    request = {"permission": "edit", "patterns": ["src/" + "x" * 400], "always": []}
    text = question(request)
    assert text.startswith("OpenCode asks to use edit: src/xxx")
    assert "…\nallow: this once; always: this and the like from now on" in text
    assert len(text) < 500
    assert question({}).startswith("OpenCode asks to use a tool: (no details given)")
    assert check_mode("ignore") == "ignore"
    with pytest.raises(ConfigurationError, match="ask, deny, ignore"):
        check_mode("yes")
