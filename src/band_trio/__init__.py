"""band-trio: a trio agent runtime for the Band platform, where stopping work is structural.

The public API is re-exported here; everything else lives in private modules.

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

from .adapters import DemoAdapter as DemoAdapter
from .contract import Adapter as Adapter
from .contract import Message as Message
from .contract import Turn as Turn
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
from .errors import PlatformError as PlatformError
from .errors import PlatformProtocolError as PlatformProtocolError
from .errors import PlatformResponseError as PlatformResponseError
from .errors import PlatformUnavailableError as PlatformUnavailableError
from .errors import RateLimitedError as RateLimitedError
from .policy import Policy as Policy
from .runtime import AbortKind as AbortKind
from .runtime import Agent as Agent
from .runtime import Overrun as Overrun
from .runtime import RoomView as RoomView
from .runtime import SignalCounts as SignalCounts
from .runtime import StopResult as StopResult
from .runtime import UnsettledMark as UnsettledMark

__version__ = "0.1.0.dev0"

__all__ = [
    "AbortKind",
    "Adapter",
    "Agent",
    "AgentDisconnectedError",
    "AuthenticationError",
    "BandTrioError",
    "ConfigurationError",
    "ConflictError",
    "ConnectionClosedError",
    "DemoAdapter",
    "DisconnectReason",
    "ExecutionStoppedError",
    "JoinError",
    "Message",
    "NotFoundError",
    "Overrun",
    "PlatformError",
    "PlatformProtocolError",
    "PlatformResponseError",
    "PlatformUnavailableError",
    "Policy",
    "RateLimitedError",
    "RoomView",
    "SignalCounts",
    "StopResult",
    "Turn",
    "UnsettledMark",
]
