"""The bridge: forward the events of N agent identities to remote agents.

`Bridge` (`band-trio bridge --config FILE`) runs, per identity, the runtime's
link and the runtime's rooms (`runtime.parts`): each message, room or
participant event is a turn whose work is a forward to the target, in its own
cancel scope; interrupt cancels the forward in flight and consumes its message,
stop cancels it and clears the room's queue until play's `/next` catch-up;
`GET /health` per identity. Targets: HTTP, A2A, command. The bridge claims and
settles each message it forwards (`processing`, then `processed`; `failed` once
`forward_attempts` sends failed, with a backoff between them) unless the target
says `settle = "target"`.

What a target reads is public here: the envelope (`Envelope`, `decode_envelope`,
`FORWARDED_EVENTS`, `INTERRUPTED`) and `BridgePolicy`. The host on the other end
(`band-trio host`) is a package of its own, `band_trio.host`: a target built on
these names, a layer above the bridge, which never imports it. A recording HTTP
target to test a bridge against is `band_trio.testing`'s `open_recording_target`.
See docs/how-to/bridge.md.
"""

from __future__ import annotations

from ._bridge import Bridge as Bridge
from ._bridge import BridgeResult as BridgeResult
from ._config import A2ATargetConfig as A2ATargetConfig
from ._config import BridgeConfig as BridgeConfig
from ._config import CommandTargetConfig as CommandTargetConfig
from ._config import HttpTargetConfig as HttpTargetConfig
from ._config import IdentityConfig as IdentityConfig
from ._config import load_config as load_config
from ._config import parse_config as parse_config
from ._envelope import FORWARDED_EVENTS as FORWARDED_EVENTS
from ._envelope import INTERRUPTED as INTERRUPTED
from ._envelope import Envelope as Envelope
from ._envelope import decode_envelope as decode_envelope
from ._health import health_body as health_body
from ._identity import IdentityStatus as IdentityStatus
from ._policy import BridgePolicy as BridgePolicy

__all__ = [
    "FORWARDED_EVENTS",
    "INTERRUPTED",
    "A2ATargetConfig",
    "Bridge",
    "BridgeConfig",
    "BridgePolicy",
    "BridgeResult",
    "CommandTargetConfig",
    "Envelope",
    "HttpTargetConfig",
    "IdentityConfig",
    "IdentityStatus",
    "decode_envelope",
    "health_body",
    "load_config",
    "parse_config",
]
