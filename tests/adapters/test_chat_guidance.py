"""Guidance in the chat adapters (OpenAI-compatible, Anthropic) against a real stubllm, over
the embedded platform with the runtime in a `WhileBusy.STEER` room.

A message sent while the model's tool runs is taken after the tool's result and before
the next model call: stubllm's record of that call holds it as a user message naming its
sender; the message is marked processed with the turn and never answered on its own. One
that arrives during the last model call (no tool round after it) is not taken: it runs as
its own turn afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from band_trio import Turn, WhileBusy
from band_trio.adapters import AnthropicAdapter, OpenAIChatAdapter, Tool
from band_trio.contract import Adapter
from band_trio.platform import Platform
from peers import Peer, shared_stubllm_peer
from support import claims, replies, running_agent, seeded, status

DEADLINE = 20


async def offered(turn: Turn) -> None:
    """Until guidance waits to be taken, without taking it (the adapter takes it)."""
    await turn.wait_guidance()


class Lookup:
    """The `lookup` tool: it holds its result until guidance is offered to the turn."""

    def __init__(self) -> None:
        self.started = trio.Event()

    async def __call__(self, arguments: dict[str, Any], turn: Turn) -> str:
        self.started.set()
        await offered(turn)
        return "sunny"


def openai(peer: Peer, tool: Tool) -> Adapter:
    return OpenAIChatAdapter(peer.base_url, "gpt-4o", tools=[tool])


def anthropic(peer: Peer, tool: Tool) -> Adapter:
    return AnthropicAdapter(peer.url, "claude-sonnet-4-6", api_key="sk-test", tools=[tool])


def requests(peer: Peer, path: str) -> list[dict[str, Any]]:
    return [e["body"] for e in peer.events("request") if e["path"] == path]


def user_texts(body: dict[str, Any]) -> list[str]:
    """The text of every user message of a request, tool results left out (both APIs)."""
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts += [block["text"] for block in content if block.get("type") == "text"]
    return texts


@pytest.mark.parametrize(
    ("make", "path"),
    [(openai, "/v1/chat/completions"), (anthropic, "/v1/messages")],
    ids=["openai", "anthropic"],
)
async def test_guidance_sent_during_a_tool_reaches_the_next_model_call(
    platform: Platform, make: Any, path: str
) -> None:
    agent, room, user = seeded(platform)
    lookup = Lookup()
    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = make(peer, tool)
            async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
                asked = platform.post_message(room, user, "[tool] weather?", mentions=[agent])
                await lookup.started.wait()
                hint = platform.post_message(room, user, "in celsius please", mentions=[agent])
                await platform.wait_until(lambda: status(platform, asked) == "processed")
                await platform.wait_until(lambda: status(platform, hint) == "processed")
            first, second = requests(peer, path)
    assert user_texts(first) == ["[tool] weather?"]
    assert user_texts(second) == [
        "[tool] weather?",
        "Alice added, while you were working on this: in celsius please",
    ]
    assert claims(platform, hint) == 1  # claimed once, when taken
    assert replies(platform, room) == ["the tool said: sunny"]  # never answered on its own


async def test_guidance_after_the_last_model_call_runs_as_its_own_turn(
    platform: Platform,
) -> None:
    agent, room, user = seeded(platform)
    release = trio.Event()

    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        return "sunny"

    class Held(OpenAIChatAdapter):
        async def on_turn(self, turn: Turn) -> None:
            await super().on_turn(turn)
            if turn.message.content.startswith("[tool]"):
                await release.wait()  # the turn is over for the model: nothing is taken now

    tool = Tool("lookup", "Look something up.", {"type": "object"}, lookup)
    with trio.fail_after(DEADLINE):
        async with shared_stubllm_peer() as peer:
            adapter = Held(peer.base_url, "gpt-4o", tools=[tool])
            async with running_agent(platform, adapter, while_busy=WhileBusy.STEER):
                asked = platform.post_message(room, user, "[tool] weather?", mentions=[agent])
                await platform.wait_until(lambda: len(replies(platform, room)) == 1)
                late = platform.post_message(room, user, "[quick] thanks", mentions=[agent])
                release.set()
                await platform.wait_until(lambda: status(platform, late) == "processed")
            assert status(platform, asked) == "processed"
            bodies = requests(peer, "/v1/chat/completions")
    assert len(bodies) == 3  # the tool round, its answer, then the late message's own turn
    assert bodies[2]["messages"][-1] == {"role": "user", "content": "[quick] thanks"}
    assert not any("added, while" in text for body in bodies for text in user_texts(body))
    assert len(replies(platform, room)) == 2  # (stubllm answers by the history's "[tool]")
