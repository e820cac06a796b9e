"""A LangGraph graph and an OpenAI Agents SDK agent for the framework adapters' tests.

Both are what a user would write: a chat model (langchain-openai's `ChatOpenAI`, the
SDK's `OpenAIChatCompletionsModel`) pointed at a stubllm server, and one async
`lookup` tool. Both talk Chat Completions, which stubllm serves (it has no
`/v1/responses`).

`graph()` and `agent()` take no argument, for `BAND_LANGGRAPH_GRAPH=frameworks:graph`
and `BAND_OPENAI_AGENTS_AGENT=frameworks:agent`: they read the model's address from
`FRAMEWORKS_MODEL_URL`. A fresh one per adapter, so a module-level HTTP client is
never carried from one asyncio loop to the next (each kit probe runs its own).

The frameworks are imported when first built, not with this module: every test worker
collects the test modules that import it, and the frameworks take seconds to import.

`TOOLS` records what the `lookup` tools did, told across the threads: the tools run
on the asyncio loop's thread, the tests read the record on trio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import trio

from band_trio.contract import Adapter, AgentInfo, RemoteStop, Turn
from band_trio.testing._observed import cancelled_only

if TYPE_CHECKING:
    from agents import Agent
    from langchain_core.tools import BaseTool
    from langgraph.graph import MessagesState
    from langgraph.graph.state import CompiledStateGraph

    from band_trio.adapters import LangGraphAdapter, OpenAIAgentsAdapter

TOOL_WORK = 30.0
"""How long `lookup` works: far longer than any test waits, so it ends by a cancel."""


class ToolLog:
    """What the `lookup` tools did: `started` (a trio event, set from the asyncio thread
    through the test's trio token) and `events` ("started", "cancelled", "finished")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[str] = []
        self._token: trio.lowlevel.TrioToken | None = None
        self.started = trio.Event()
        self.work = TOOL_WORK

    def arm(self, work: float = TOOL_WORK) -> None:
        """In the test's trio run, before the turn: a fresh record and `started` event;
        the tool works for `work` seconds (asyncio's sleep)."""
        self.work = work
        self._token = trio.lowlevel.current_trio_token()
        self.started = trio.Event()
        with self._lock:
            self._events.clear()

    @property
    def events(self) -> list[str]:
        with self._lock:
            return list(self._events)

    def add(self, event: str) -> None:  # the asyncio thread
        with self._lock:
            self._events.append(event)
        if event == "started" and self._token is not None:
            started = self.started
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(started.set)


TOOLS = ToolLog()


async def _lookup(query: str) -> str:
    TOOLS.add("started")
    try:
        await asyncio.sleep(TOOLS.work)
    except asyncio.CancelledError:
        TOOLS.add("cancelled")
        raise
    TOOLS.add("finished")
    return f"sunny ({query})"


@functools.cache
def lookup() -> BaseTool:
    """`lookup` as a LangChain tool."""
    from langchain_core.tools import tool

    @tool
    async def lookup(query: str) -> str:
        """Look something up."""
        return await _lookup(query)

    return lookup


@functools.cache
def agents_lookup() -> Any:
    """`lookup` as an Agents SDK function tool."""
    from agents import function_tool

    @function_tool
    async def lookup(query: str) -> str:
        """Look something up."""
        return await _lookup(query)

    return lookup


def model_url() -> str:
    return os.environ["FRAMEWORKS_MODEL_URL"]


def http_client() -> httpx.AsyncClient:
    """The model's HTTP client: no keep-alive. A connection kept alive belongs to the
    asyncio loop that opened it, and asyncio does not close it when the loop closes (at
    the agent's end: every kit probe's): it would be left open until collected, which
    the kit reports as a socket left open (docs/reference/adapters.md)."""
    return httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))


# -- LangGraph ------------------------------------------------------------------------


def build_graph(base_url: str, *, threads: bool = True) -> CompiledStateGraph[MessagesState]:
    """A tool-calling graph: the model, then the tools it asks for, then the model again.
    `threads`: compiled with a checkpointer (a thread per room)."""
    from langchain_core.messages import AnyMessage
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    model = ChatOpenAI(
        model="gpt-4o-mini",
        base_url=base_url,
        api_key="sk-test",
        streaming=True,
        max_retries=0,
        http_async_client=http_client(),
    )
    with_tools = model.bind_tools([lookup()])

    async def think(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [await with_tools.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", think)
    builder.add_node("tools", ToolNode([lookup()]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=InMemorySaver() if threads else None)


def graph() -> CompiledStateGraph[MessagesState]:
    return build_graph(model_url())


def graph_adapter(base_url: str, **options: Any) -> LangGraphAdapter:
    """The adapter on `build_graph(base_url)` (`threads` among `options`, the rest the
    adapter's)."""
    from band_trio.adapters import LangGraphAdapter

    threads = options.pop("threads", True)
    return LangGraphAdapter(build_graph(base_url, threads=threads), **options)


# -- the OpenAI Agents SDK --------------------------------------------------------------


def build_agent(base_url: str) -> Agent[None]:
    from agents import Agent, OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        base_url=base_url, api_key="sk-test", max_retries=0, http_client=http_client()
    )
    return Agent(
        name="weather",
        instructions="Answer briefly.",
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
        tools=[agents_lookup()],
    )


def agent() -> Agent[None]:
    return build_agent(model_url())


def agents_adapter(base_url: str, **options: Any) -> OpenAIAgentsAdapter:
    from band_trio.adapters import OpenAIAgentsAdapter

    return OpenAIAgentsAdapter(build_agent(base_url), **options)


# -- watching an adapter ----------------------------------------------------------------


class Watched(Adapter):
    """An adapter, recording per message how its turn ended and the turn's remote stops
    (for the tests only: the kit's `Observed` does this for the probes)."""

    def __init__(self, inner: Adapter) -> None:
        self.inner = inner
        self.stops: dict[str, tuple[RemoteStop, ...]] = {}
        """Per message, its last turn's remote stops..."""
        self.turns: dict[str, list[tuple[RemoteStop, ...]]] = {}
        """...and every turn's (a stopped message is entered again after play)."""
        self.cancelled_at: dict[str, float] = {}
        self._changed = trio.Event()

    async def on_started(self, agent: AgentInfo) -> None:
        await self.inner.on_started(agent)

    async def on_room_left(self, room_id: str) -> None:
        await self.inner.on_room_left(room_id)

    async def on_turn(self, turn: Turn) -> None:
        try:
            await self.inner.on_turn(turn)
        except BaseException as exc:
            if cancelled_only(exc):
                self.cancelled_at[turn.message.id] = time.perf_counter()
            raise
        finally:
            self.stops[turn.message.id] = turn.remote_stops
            self.turns.setdefault(turn.message.id, []).append(turn.remote_stops)
            self._changed.set()
            self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()
