"""band-trio: a trio agent runtime for the Band platform, where stopping work is structural.

The top level holds what running an agent and writing an adapter need; the
rest lives in named subpackages (docs/reference/api.md lists each):

    band_trio.adapters   the reference adapters: OpenAI chat, A2A, command, OpenCode, ...
    band_trio.contract   the adapter contract: remote work, upstream calls, subprocesses
    band_trio.runtime    the Agent and what it reports (rooms, stops, signals)
    band_trio.errors     the whole exception tree
    band_trio.policy     every agent policy: Policy, UpstreamPolicy, PlatformPolicy, ...
    band_trio.platform   the embedded Band platform
    band_trio.testing    the conformance kit, recording adapters and targets, task tracking
    band_trio.bridge     the bridge: agent identities' events forwarded to remote agents
    band_trio.host       the bridge's other end: an adapter behind `band-trio host`
    band_trio.runs       the runs API

The names that need trio (the runtime and the adapter contract) are imported
on first use, so `import band_trio.wire` (sans-IO) or `band_trio.errors` never
pulls in trio, httpx2 or trio-websocket. So are the errors and the policies, and
`typing` is not imported at all: the `band-trio` console script imports this
package before `band_trio.cli.main` can catch a Ctrl-C, and whatever runs here
is a window in which one prints a `KeyboardInterrupt` traceback (33 ms of
imports before, 2 ms now).

    from band_trio import Adapter, Agent, Turn

    class Echo(Adapter):
        async def on_turn(self, turn: Turn) -> None:
            await turn.reply(f"echo: {turn.message.content}")

    async with trio.open_nursery() as nursery:
        agent = Agent(Echo(), agent_id=..., api_key=..., rest_url=..., ws_url=...)
        await nursery.start(agent.run)
        ...
        await agent.stop()
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
"""`typing.TYPE_CHECKING`, without importing `typing` (12 ms): see below."""

if TYPE_CHECKING:
    from typing import Any

    from .contract import Adapter as Adapter
    from .contract import AgentInfo as AgentInfo
    from .contract import Message as Message
    from .contract import StopOutcome as StopOutcome
    from .contract import Turn as Turn
    from .errors import AdapterError as AdapterError
    from .errors import AgentDisconnectedError as AgentDisconnectedError
    from .errors import AuthenticationError as AuthenticationError
    from .errors import BandTrioError as BandTrioError
    from .errors import ConfigurationError as ConfigurationError
    from .errors import PlatformError as PlatformError
    from .errors import UpstreamError as UpstreamError
    from .policy import Policy as Policy
    from .policy import UpstreamPolicy as UpstreamPolicy
    from .policy import WhileBusy as WhileBusy
    from .runtime import Agent as Agent
    from .runtime import StopResult as StopResult

__version__ = "0.1.0.dev0"

_ON_FIRST_USE = {
    "AdapterError": "band_trio.errors",
    "AgentDisconnectedError": "band_trio.errors",
    "AuthenticationError": "band_trio.errors",
    "BandTrioError": "band_trio.errors",
    "ConfigurationError": "band_trio.errors",
    "PlatformError": "band_trio.errors",
    "UpstreamError": "band_trio.errors",
    "Policy": "band_trio.policy",
    "UpstreamPolicy": "band_trio.policy",
    "WhileBusy": "band_trio.policy",
    "Adapter": "band_trio.contract",
    "AgentInfo": "band_trio.contract",
    "Message": "band_trio.contract",
    "StopOutcome": "band_trio.contract",
    "Turn": "band_trio.contract",
    "Agent": "band_trio.runtime",
    "StopResult": "band_trio.runtime",
}

_MOVED = {
    name: module
    for module, names in (
        ("band_trio.adapters", "A2AAdapter CommandAdapter DemoAdapter OpenAIChatAdapter"),
        (
            "band_trio.contract",
            "CommandResult LastAbort Participant RemoteStop RemoteWork UpstreamFault "
            "call_upstream close_tool_calls not_run_note run_command run_in_thread "
            "stream_request",
        ),
        (
            "band_trio.runtime",
            "AbortKind Overrun RemoteStopStats RoomView SignalCounts UnsettledMark",
        ),
        (
            "band_trio.errors",
            "ConflictError ConnectionClosedError DisconnectReason ExecutionStoppedError "
            "JoinError NotFoundError PeerProtocolError PlatformProtocolError "
            "PlatformResponseError PlatformUnavailableError RateLimitedError",
        ),
        ("band_trio.policy", "BusyPolicy PlatformPolicy ServerPolicy"),
    )
    for name in names.split()
}
"""Names the top level held before 0.1 (CHANGELOG), and where each lives now."""


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all

    def __getattr__(name: str) -> Any:
        """Import a trio-backed name the first time it is used (PEP 562). A name that
        moved to a subpackage raises an `ImportError` saying where: `from band_trio
        import X` would turn an `AttributeError` into one that does not."""
        module = _ON_FIRST_USE.get(name)
        if module is None:
            moved = _MOVED.get(name)
            if moved is not None:
                raise ImportError(
                    f"band_trio.{name} moved to {moved}: `from {moved} import {name}`",
                    name=name,
                )
            raise AttributeError(f"module 'band_trio' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "Adapter",
    "AdapterError",
    "Agent",
    "AgentDisconnectedError",
    "AgentInfo",
    "AuthenticationError",
    "BandTrioError",
    "ConfigurationError",
    "Message",
    "PlatformError",
    "Policy",
    "StopOutcome",
    "StopResult",
    "Turn",
    "UpstreamError",
    "UpstreamPolicy",
    "WhileBusy",
]
