"""Real local test peers (a2a-sdk 1.3.0, stubllm 0.1.5) run as subprocesses, plus trio helpers,
the project's own fault-injecting proxy to put in front of them, and a peer that accepts
a request and never answers (`silent_peer`, in the test's own run).

Import from tests as ``from peers import a2a_peer, stubllm_peer`` (``tests/`` is on sys.path).
"""

from .fixtures import (
    A2A_SCRIPT,
    FAULT_PROXY_SCRIPT,
    STUBLLM_FIXTURES,
    STUBLLM_SCRIPT,
    Event,
    Peer,
    PeerError,
    a2a_peer,
    fault_proxy,
    plan,
    stubllm_peer,
)
from .shared import shared_a2a_peer, shared_stubllm_peer
from .silent import SilentPeer, silent_peer

__all__ = [
    "A2A_SCRIPT",
    "FAULT_PROXY_SCRIPT",
    "STUBLLM_FIXTURES",
    "STUBLLM_SCRIPT",
    "Event",
    "Peer",
    "PeerError",
    "SilentPeer",
    "a2a_peer",
    "fault_proxy",
    "plan",
    "shared_a2a_peer",
    "shared_stubllm_peer",
    "silent_peer",
    "stubllm_peer",
]
