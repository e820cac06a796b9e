"""band-trio: a trio agent runtime for the Band platform, where stopping work is structural.

The public API is re-exported here; everything else lives in private modules.
The names that need trio (the runtime and the demo adapter) are imported on
first use, so `import band_trio.wire` (sans-IO) or `band_trio.errors` never
pulls in trio, httpx2 or trio-websocket.

    from band_trio import Agent, Adapter, Turn

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
from typing import TYPE_CHECKING, Any

from .errors import AdapterError as AdapterError
from .errors import AgentDisconnectedError as AgentDisconnectedError
from .errors import AuthenticationError as AuthenticationError
from .errors import BandTrioError as BandTrioError
from .errors import ConfigurationError as ConfigurationError
from .errors import ConflictError as ConflictError
from .errors import ConnectionClosedError as ConnectionClosedError
from .errors import DisconnectReason as DisconnectReason
from .errors import ExecutionStoppedError as ExecutionStoppedError
from .errors import JoinError as JoinError
from .errors import NotFoundError as NotFoundError
from .errors import PeerProtocolError as PeerProtocolError
from .errors import PlatformError as PlatformError
from .errors import PlatformProtocolError as PlatformProtocolError
from .errors import PlatformResponseError as PlatformResponseError
from .errors import PlatformUnavailableError as PlatformUnavailableError
from .errors import RateLimitedError as RateLimitedError
from .errors import UpstreamError as UpstreamError
from .policy import BusyPolicy as BusyPolicy
from .policy import PlatformPolicy as PlatformPolicy
from .policy import Policy as Policy
from .policy import ServerPolicy as ServerPolicy
from .policy import UpstreamPolicy as UpstreamPolicy
from .policy import WhileBusy as WhileBusy

if TYPE_CHECKING:
    from .adapters import A2AAdapter as A2AAdapter
    from .adapters import CommandAdapter as CommandAdapter
    from .adapters import DemoAdapter as DemoAdapter
    from .adapters import OpenAIChatAdapter as OpenAIChatAdapter
    from .contract import Adapter as Adapter
    from .contract import AgentInfo as AgentInfo
    from .contract import CommandResult as CommandResult
    from .contract import LastAbort as LastAbort
    from .contract import Message as Message
    from .contract import Participant as Participant
    from .contract import RemoteStop as RemoteStop
    from .contract import RemoteWork as RemoteWork
    from .contract import StopOutcome as StopOutcome
    from .contract import Turn as Turn
    from .contract import UpstreamFault as UpstreamFault
    from .contract import call_upstream as call_upstream
    from .contract import close_tool_calls as close_tool_calls
    from .contract import not_run_note as not_run_note
    from .contract import run_command as run_command
    from .contract import run_in_thread as run_in_thread
    from .contract import stream_request as stream_request
    from .runtime import AbortKind as AbortKind
    from .runtime import Agent as Agent
    from .runtime import Overrun as Overrun
    from .runtime import RemoteStopStats as RemoteStopStats
    from .runtime import RoomView as RoomView
    from .runtime import SignalCounts as SignalCounts
    from .runtime import StopResult as StopResult
    from .runtime import UnsettledMark as UnsettledMark

__version__ = "0.1.0.dev0"

_ON_FIRST_USE = {
    "A2AAdapter": "band_trio.adapters",
    "CommandAdapter": "band_trio.adapters",
    "DemoAdapter": "band_trio.adapters",
    "OpenAIChatAdapter": "band_trio.adapters",
    "Adapter": "band_trio.contract",
    "AgentInfo": "band_trio.contract",
    "CommandResult": "band_trio.contract",
    "LastAbort": "band_trio.contract",
    "Message": "band_trio.contract",
    "Participant": "band_trio.contract",
    "RemoteStop": "band_trio.contract",
    "RemoteWork": "band_trio.contract",
    "StopOutcome": "band_trio.contract",
    "Turn": "band_trio.contract",
    "UpstreamFault": "band_trio.contract",
    "call_upstream": "band_trio.contract",
    "close_tool_calls": "band_trio.contract",
    "not_run_note": "band_trio.contract",
    "run_command": "band_trio.contract",
    "run_in_thread": "band_trio.contract",
    "stream_request": "band_trio.contract",
    "AbortKind": "band_trio.runtime",
    "Agent": "band_trio.runtime",
    "Overrun": "band_trio.runtime",
    "RemoteStopStats": "band_trio.runtime",
    "RoomView": "band_trio.runtime",
    "SignalCounts": "band_trio.runtime",
    "StopResult": "band_trio.runtime",
    "UnsettledMark": "band_trio.runtime",
}


if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all

    def __getattr__(name: str) -> Any:
        """Import a trio-backed name the first time it is used (PEP 562)."""
        module = _ON_FIRST_USE.get(name)
        if module is None:
            raise AttributeError(f"module 'band_trio' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "A2AAdapter",
    "AbortKind",
    "Adapter",
    "AdapterError",
    "Agent",
    "AgentDisconnectedError",
    "AgentInfo",
    "AuthenticationError",
    "BandTrioError",
    "BusyPolicy",
    "CommandAdapter",
    "CommandResult",
    "ConfigurationError",
    "ConflictError",
    "ConnectionClosedError",
    "DemoAdapter",
    "DisconnectReason",
    "ExecutionStoppedError",
    "JoinError",
    "LastAbort",
    "Message",
    "NotFoundError",
    "OpenAIChatAdapter",
    "Overrun",
    "Participant",
    "PeerProtocolError",
    "PlatformError",
    "PlatformPolicy",
    "PlatformProtocolError",
    "PlatformResponseError",
    "PlatformUnavailableError",
    "Policy",
    "RateLimitedError",
    "RemoteStop",
    "RemoteStopStats",
    "RemoteWork",
    "RoomView",
    "ServerPolicy",
    "SignalCounts",
    "StopOutcome",
    "StopResult",
    "Turn",
    "UnsettledMark",
    "UpstreamError",
    "UpstreamFault",
    "UpstreamPolicy",
    "WhileBusy",
    "call_upstream",
    "close_tool_calls",
    "not_run_note",
    "run_command",
    "run_in_thread",
    "stream_request",
]
