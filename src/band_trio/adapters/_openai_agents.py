"""An OpenAI Agents SDK agent as a Band agent: `band_trio.adapters:openai_agents`.

    export BAND_OPENAI_AGENTS_AGENT=my_agent:agent
    band-trio agent --adapter band_trio.adapters:openai_agents

Each turn runs the user's `Agent` once, streamed (`Runner.run_streamed`, its events
consumed inside the asyncio task), on the agent's asyncio loop (`run_asyncio`). Its
input is the room's recent conversation up to the message being answered, as
messages (`{"role": "user" | "assistant" | "system", "content": ...}`). The answer is
the run's final output, posted as one reply when the run ends; the function tools it
calls and their results are posted as `tool_call` and `tool_result` events while it
runs. The room's history is the conversation: nothing of a run is kept between turns
(give the agent an SDK `Session` of your own for more), so an aborted run, which
posts nothing, leaves nothing for the next one to repair.

How it stops. An interrupt or stop cancels the asyncio task that consumes the run's
events; the SDK then cancels its run (the model's stream is closed, so the model
server stops generating) and the function tool that was running, where it awaits.
The turn waits for all of it (`Policy.backend_stop_grace`).

Tracing. The SDK exports a trace of every run to OpenAI's servers unless told not
to. An agent in a room has no business calling out to a vendor it was not given, so
the adapter turns the export off for its runs (`RunConfig.tracing_disabled`), unless
`tracing=True` (`BAND_OPENAI_AGENTS_TRACING=yes`): the SDK's own tracing set-up then
applies (its processors, `OPENAI_AGENTS_DISABLE_TRACING`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, cast

from agents import Agent, RunConfig, Runner, TResponseInputItem
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.stream_events import RunItemStreamEvent, StreamEvent

from ..contract import Adapter, AgentInfo, Turn
from ..errors import BandTrioError, ConfigurationError
from ._framework import Said, conversation, load_named
from ._handoff import Handoff

__all__ = ["OpenAIAgentsAdapter", "OpenAIAgentsError", "openai_agents"]

_YES = {"1", "yes", "true", "on"}
_NO = {"", "0", "no", "false", "off"}


class OpenAIAgentsError(BandTrioError):
    """The agent's run ended without an answer to post (an empty final output)."""


class OpenAIAgentsAdapter(Adapter):
    """Answers each message with one streamed run of an OpenAI Agents SDK `Agent`.

    `run_config`: the SDK's `RunConfig` for every run (its `tracing_disabled` is set
    unless `tracing`); `max_turns`: the SDK's bound on model calls per run (its default
    when None); `max_history`: the room's messages given to a run (the newest)."""

    def __init__(
        self,
        agent: Agent[Any],
        *,
        run_config: RunConfig | None = None,
        tracing: bool = False,
        max_turns: int | None = None,
        max_history: int = 50,
        post_tool_events: bool = True,
    ) -> None:
        if max_history < 1:
            raise ValueError("max_history must be at least 1")
        config = run_config or RunConfig()
        self.agent = agent
        self.run_config = config if tracing else dataclasses.replace(config, tracing_disabled=True)
        self.max_turns = max_turns
        self.max_history = max_history
        self.post_tool_events = post_tool_events
        self._me: str | None = None

    async def on_started(self, agent: AgentInfo) -> None:
        self._me = agent.id

    async def on_turn(self, turn: Turn) -> None:
        said = await conversation(turn, self._me, self.max_history)
        handoff = Handoff(turn, enabled=self.post_tool_events)
        answer = await handoff.run(self._run, [_item(line) for line in said])
        await turn.reply(answer)

    # -- on the asyncio loop ---------------------------------------------------------

    async def _run(self, items: list[TResponseInputItem], handoff: Handoff) -> str:
        options: dict[str, Any] = {"run_config": self.run_config}
        if self.max_turns is not None:
            options["max_turns"] = self.max_turns
        result = Runner.run_streamed(self.agent, items, **options)
        names: dict[str, str] = {}
        try:
            async for event in result.stream_events():
                _post_tools(event, handoff, names)
        finally:
            if not result.is_complete:  # cut off: the SDK's run with it
                result.cancel()
        return _answer(result.final_output)


def _item(line: Said) -> TResponseInputItem:
    return cast(TResponseInputItem, {"role": line.role, "content": line.content})


def _post_tools(event: StreamEvent, handoff: Handoff, names: dict[str, str]) -> None:
    if not isinstance(event, RunItemStreamEvent):
        return
    item = event.item
    if isinstance(item, ToolCallItem):
        call_id = item.call_id or ""
        name = item.tool_name or "tool"
        names[call_id] = name
        handoff.tool_call(call_id, name, str(getattr(item.raw_item, "arguments", "") or "{}"))
    elif isinstance(item, ToolCallOutputItem):
        call_id = item.call_id or ""
        handoff.tool_result(call_id, names.get(call_id, "tool"), item.output)


def _answer(output: object) -> str:
    if isinstance(output, str):
        text = output
    elif hasattr(output, "model_dump_json"):  # an `output_type` of pydantic's
        text = str(output.model_dump_json())
    else:
        try:
            text = json.dumps(output, ensure_ascii=False)
        except (TypeError, ValueError):
            text = str(output)
    if output is None or not text.strip():
        raise OpenAIAgentsError("the agent's run ended with no final output to post")
    return text


def openai_agents() -> OpenAIAgentsAdapter:
    """The adapter for `--adapter band_trio.adapters:openai_agents`: the `Agent` named by
    `BAND_OPENAI_AGENTS_AGENT=MODULE:ATTR` (the agent, or a function that returns one);
    `BAND_OPENAI_AGENTS_TRACING=yes` keeps the SDK's trace export (off by default)."""
    agent = load_named("BAND_OPENAI_AGENTS_AGENT", Agent, "an OpenAI Agents SDK Agent")
    tracing = os.environ.get("BAND_OPENAI_AGENTS_TRACING", "").strip().lower()
    if tracing not in _YES | _NO:
        raise ConfigurationError(f"BAND_OPENAI_AGENTS_TRACING must be yes or no, not {tracing!r}")
    return OpenAIAgentsAdapter(cast("Agent[Any]", agent), tracing=tracing in _YES)
