"""Reference adapters, built only on the contract (`band_trio.contract`).

Each has a zero-argument factory for `band-trio agent --adapter
band_trio.adapters:NAME`, configured from the environment:

| NAME          | adapter             | talks to                                   |
|---------------|---------------------|--------------------------------------------|
| `demo`        | `DemoAdapter`       | nothing: echoes (`sleep=N` pretends to think) |
| `openai_chat` | `OpenAIChatAdapter` | an OpenAI-compatible chat completions server |
| `anthropic`   | `AnthropicAdapter`  | Anthropic's Messages API (the `anthropic` SDK; an extra) |
| `a2a`         | `A2AAdapter`        | an A2A agent (protocol 1.0 JSON-RPC, 0.3 fallback) |
| `command`     | `CommandAdapter`    | a command run per message, in its own process group |
| `opencode`    | `OpenCodeAdapter`   | an `opencode serve` agent server (one session per room) |
| `copilot`     | `CopilotAdapter`    | the GitHub Copilot CLI, with a model server of yours |
| `acp`         | `AcpAdapter`        | a coding agent that speaks ACP (`opencode acp`, ...)  |
| `langgraph`   | `LangGraphAdapter`  | your compiled LangGraph graph (`band-trio[langgraph]`) |
| `openai_agents` | `OpenAIAgentsAdapter` | your Agents SDK agent (`band-trio[openai-agents]`) |

See docs/reference/adapters.md for their settings and how each one stops its peer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy

if TYPE_CHECKING:
    from ._a2a import A2AAdapter as A2AAdapter
    from ._a2a import A2AError as A2AError
    from ._a2a import A2AProtocolError as A2AProtocolError
    from ._a2a import A2ARpcError as A2ARpcError
    from ._a2a import A2ATaskError as A2ATaskError
    from ._a2a import a2a as a2a
    from ._acp import AcpAdapter as AcpAdapter
    from ._acp import acp as acp
    from ._acp_agent import AcpAgent as AcpAgent
    from ._acp_agent import AcpError as AcpError
    from ._acp_config import TOOL_KINDS as TOOL_KINDS
    from ._acp_config import AcpConfig as AcpConfig
    from ._anthropic import AnthropicAdapter as AnthropicAdapter
    from ._anthropic import anthropic as anthropic
    from ._anthropic_stream import AnthropicMessagesError as AnthropicMessagesError
    from ._command import CommandAdapter as CommandAdapter
    from ._command import CommandFailedError as CommandFailedError
    from ._command import command as command
    from ._copilot import CopilotAdapter as CopilotAdapter
    from ._copilot import copilot as copilot
    from ._copilot_cli import CopilotCli as CopilotCli
    from ._copilot_config import PERMISSION_KINDS as PERMISSION_KINDS
    from ._copilot_config import CopilotConfig as CopilotConfig
    from ._copilot_errors import CopilotError as CopilotError
    from ._demo import DemoAdapter as DemoAdapter
    from ._demo import demo as demo
    from ._langgraph import LangGraphAdapter as LangGraphAdapter
    from ._langgraph import LangGraphError as LangGraphError
    from ._langgraph import langgraph as langgraph
    from ._openai import OpenAIChatAdapter as OpenAIChatAdapter
    from ._openai import openai_chat as openai_chat
    from ._openai_agents import OpenAIAgentsAdapter as OpenAIAgentsAdapter
    from ._openai_agents import OpenAIAgentsError as OpenAIAgentsError
    from ._openai_agents import openai_agents as openai_agents
    from ._openai_stream import OpenAIChatError as OpenAIChatError
    from ._opencode import OpenCodeAdapter as OpenCodeAdapter
    from ._opencode import OpenCodeError as OpenCodeError
    from ._opencode_config import opencode as opencode
    from ._tool import Tool as Tool

# Each adapter is imported when first named, not with the package: a command that
# runs one adapter (or none) does not pay for the others' dependencies.
_WHERE = {
    "AcpAdapter": "._acp",
    "acp": "._acp",
    "AcpAgent": "._acp_agent",
    "AcpError": "._acp_agent",
    "TOOL_KINDS": "._acp_config",
    "AcpConfig": "._acp_config",
    "A2AAdapter": "._a2a",
    "A2AError": "._a2a",
    "A2AProtocolError": "._a2a",
    "A2ARpcError": "._a2a",
    "A2ATaskError": "._a2a",
    "a2a": "._a2a",
    "AnthropicAdapter": "._anthropic",
    "anthropic": "._anthropic",
    "AnthropicMessagesError": "._anthropic_stream",
    "CommandAdapter": "._command",
    "CommandFailedError": "._command",
    "command": "._command",
    "CopilotAdapter": "._copilot",
    "copilot": "._copilot",
    "CopilotCli": "._copilot_cli",
    "PERMISSION_KINDS": "._copilot_config",
    "CopilotConfig": "._copilot_config",
    "CopilotError": "._copilot_errors",
    "DemoAdapter": "._demo",
    "demo": "._demo",
    "LangGraphAdapter": "._langgraph",
    "LangGraphError": "._langgraph",
    "langgraph": "._langgraph",
    "OpenAIChatAdapter": "._openai",
    "Tool": "._tool",
    "openai_chat": "._openai",
    "OpenAIAgentsAdapter": "._openai_agents",
    "OpenAIAgentsError": "._openai_agents",
    "openai_agents": "._openai_agents",
    "OpenAIChatError": "._openai_stream",
    "OpenCodeAdapter": "._opencode",
    "OpenCodeError": "._opencode",
    "opencode": "._opencode_config",
}

__all__ = [
    "PERMISSION_KINDS",
    "TOOL_KINDS",
    "A2AAdapter",
    "A2AError",
    "A2AProtocolError",
    "A2ARpcError",
    "A2ATaskError",
    "AcpAdapter",
    "AcpAgent",
    "AcpConfig",
    "AcpError",
    "AnthropicAdapter",
    "AnthropicMessagesError",
    "CommandAdapter",
    "CommandFailedError",
    "CopilotAdapter",
    "CopilotCli",
    "CopilotConfig",
    "CopilotError",
    "DemoAdapter",
    "LangGraphAdapter",
    "LangGraphError",
    "OpenAIAgentsAdapter",
    "OpenAIAgentsError",
    "OpenAIChatAdapter",
    "OpenAIChatError",
    "OpenCodeAdapter",
    "OpenCodeError",
    "Tool",
    "a2a",
    "acp",
    "anthropic",
    "command",
    "copilot",
    "demo",
    "langgraph",
    "openai_agents",
    "openai_chat",
    "opencode",
]


__getattr__, __dir__ = lazy(__name__, _WHERE, __all__)
