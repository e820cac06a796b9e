"""A LangGraph graph as a Band agent: `band_trio.adapters:langgraph`.

    export BAND_LANGGRAPH_GRAPH=my_graph:graph
    band-trio agent --adapter band_trio.adapters:langgraph

Each turn runs the user's compiled graph once, on the agent's asyncio loop
(`run_asyncio`), with a `MessagesState`-shaped input: `{"messages": [...]}`, the
room's recent conversation up to the message being answered as langchain
messages (`HumanMessage`, `AIMessage` for the agent's own, `SystemMessage`), each
with the platform's message id as its `id`. The answer is the last AI message of
the graph's final state, posted as one reply when the graph ends (Band posts whole
messages); the tool calls the graph's model makes and their results are posted as
`tool_call` and `tool_result` events while it runs.

A graph compiled with a checkpointer keeps the conversation itself, per room: it is
run with the room's id as its `thread_id`, and given only the messages its thread
does not hold yet (all of the room's, the agent's own included, when the thread is
empty). The platform's ids make that exact, and a message sent twice is merged by
`add_messages`, not repeated.

How it stops. An interrupt or stop cancels the asyncio task, which cancels what it
awaits: the model's HTTP stream (closed, so the model server stops generating) or
the tool that runs. The turn waits for it (`Policy.backend_stop_grace`).

After an abort. Nothing of an aborted run is posted. A checkpointer may have saved
the run's steps up to the cut: an AI message whose tool calls never got their
results (the tools node was cancelled). A model would refuse that thread, so before
the room's next run the adapter answers each such call with a `ToolMessage` that
says it did not run and why (`not_run_note`: "not run: the turn was interrupted by
the user (reason: …)"), ahead of the new messages; they follow the cut call at
once, as an aborted run's state ends with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from ..contract import Adapter, AgentInfo, Turn
from ..errors import BandTrioError
from ._framework import Said, conversation, cut_note, load_named
from ._handoff import Handoff

__all__ = ["LangGraphAdapter", "LangGraphError", "langgraph"]

Graph = Pregel[Any, Any, Any, Any]


class LangGraphError(BandTrioError):
    """The graph ended without an answer to post (no AI message with text last)."""


class LangGraphAdapter(Adapter):
    """Answers each message with one run of a compiled LangGraph graph (see the module).

    `config`: the graph's `RunnableConfig` for every run (a `recursion_limit`, say);
    with a checkpointer its `configurable.thread_id` is the room's id. `max_history`:
    the room's messages given to a graph without a checkpointer (the newest)."""

    def __init__(
        self,
        graph: Graph,
        *,
        config: Mapping[str, Any] | None = None,
        max_history: int = 50,
        post_tool_events: bool = True,
    ) -> None:
        if max_history < 1:
            raise ValueError("max_history must be at least 1")
        self.graph = graph
        self.config = dict(config or {})
        self.max_history = max_history
        self.post_tool_events = post_tool_events
        self._me: str | None = None
        self._cut: dict[str, str] = {}
        """Per room: the message whose run was aborted, until the next run settled it."""

    @property
    def keeps_threads(self) -> bool:
        """Whether the graph has a checkpointer: a thread per room, kept by the graph."""
        return isinstance(self.graph.checkpointer, BaseCheckpointSaver)

    def run_config(self, room_id: str) -> RunnableConfig:
        """The config a run for `room_id` gets."""
        config = cast(RunnableConfig, dict(self.config))
        if self.keeps_threads:
            configurable = dict(config.get("configurable") or {})
            configurable["thread_id"] = room_id
            config["configurable"] = configurable
        return config

    async def on_started(self, agent: AgentInfo) -> None:
        self._me = agent.id

    async def on_room_left(self, room_id: str) -> None:
        self._cut.pop(room_id, None)  # the thread stays the graph's (its checkpointer's)

    async def on_turn(self, turn: Turn) -> None:
        said = await conversation(turn, self._me, self.max_history)
        note = cut_note(self._cut.get(turn.room_id), turn)
        handoff = Handoff(turn, enabled=self.post_tool_events)
        try:
            answer = await handoff.run(self._run, said, self.run_config(turn.room_id), note)
        except Exception:
            self._cut.pop(turn.room_id, None)  # failed, not cut: the next run says nothing
            raise
        except BaseException:
            self._cut[turn.room_id] = turn.message.id  # told why by the next turn
            raise
        self._cut.pop(turn.room_id, None)
        await turn.reply(answer)

    # -- on the asyncio loop ---------------------------------------------------------

    async def _run(
        self, said: list[Said], config: RunnableConfig, note: str, handoff: Handoff
    ) -> str:
        messages: list[BaseMessage] = [_message(line) for line in said]
        if self.keeps_threads:
            state = await self.graph.aget_state(config)
            kept = _messages_of(state.values)
            if kept:
                held = {message.id for message in kept}
                new = [m for m, line in zip(messages, said, strict=True) if _unseen(line, held)]
                messages = [*_close_tool_calls(kept, note), *new]
        final: Any = None
        async for mode, chunk in self.graph.astream(
            {"messages": messages}, config, stream_mode=["updates", "values"]
        ):
            if mode == "values":
                final = chunk
            elif isinstance(chunk, Mapping):
                _post_tools(chunk, handoff)
        return _answer(final)


def _unseen(line: Said, held: set[str | None]) -> bool:
    """A room message a thread that holds `held` should be given: the agent's own
    answers are in the thread as the graph's messages, under ids of their own."""
    return line.role != "assistant" and line.id not in held


def _message(line: Said) -> BaseMessage:
    if line.role == "assistant":
        return AIMessage(content=line.content, id=line.id)
    if line.role == "system":
        return SystemMessage(content=line.content, id=line.id)
    return HumanMessage(content=line.content, id=line.id)


def _messages_of(values: Any) -> list[AnyMessage]:
    messages = values.get("messages") if isinstance(values, Mapping) else None
    if isinstance(messages, BaseMessage):
        return [messages]  # type: ignore[list-item]
    if isinstance(messages, Sequence):
        return [m for m in messages if isinstance(m, BaseMessage)]  # type: ignore[misc]
    return []


def _close_tool_calls(kept: Sequence[BaseMessage], note: str) -> list[ToolMessage]:
    """A `ToolMessage` saying `note` for each tool call in the thread that has no result."""
    answered = {m.tool_call_id for m in kept if isinstance(m, ToolMessage)}
    return [
        ToolMessage(content=note, tool_call_id=call["id"], name=call["name"])
        for m in kept
        if isinstance(m, AIMessage)
        for call in m.tool_calls
        if call["id"] and call["id"] not in answered
    ]


def _post_tools(update: Mapping[str, Any], handoff: Handoff) -> None:
    """The tool calls and results in one step's updates (`{node: {"messages": ...}}`)."""
    for written in update.values():
        for message in _messages_of(written):
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    handoff.tool_call(call["id"] or "", call["name"], call["args"])
            elif isinstance(message, ToolMessage):
                handoff.tool_result(message.tool_call_id, message.name or "", str(message.text))


def _answer(final: Any) -> str:
    last = None
    for message in reversed(_messages_of(final)):
        if isinstance(message, HumanMessage):
            break  # what came before it answered earlier turns
        if isinstance(message, AIMessage):
            last = message
            break
    if last is None:
        raise LangGraphError("the graph ended without an AI message after the room's message")
    text = str(last.text)  # a `TextAccessor` (a str subclass) in langchain-core 1.x
    if not text.strip():
        raise LangGraphError("the graph's last AI message has no text to post")
    return text


def langgraph() -> LangGraphAdapter:
    """The adapter for `--adapter band_trio.adapters:langgraph`: the compiled graph named
    by `BAND_LANGGRAPH_GRAPH=MODULE:ATTR` (the graph, or a function that returns one)."""
    graph = load_named("BAND_LANGGRAPH_GRAPH", Pregel, "a compiled LangGraph graph")
    return LangGraphAdapter(graph)  # type: ignore[arg-type]
