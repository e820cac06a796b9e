"""The host: the other end of a bridge, running a band-trio adapter for each message.

* `HostApp` (`band-trio host --adapter MODULE:FACTORY`) — an ASGI app that
  takes the bridge's envelopes (with its bearer token) and runs an adapter for
  each message, on the platform's copy of it, with the normal claim → run →
  settle, in the runtime's rooms; each answer says what happened, non-2xx when
  the turn did not run; when the forward's request goes away, the turn is
  cancelled.
* `serve_host` — checks the key, then serves a `HostApp` until a stop.

The host is a target of the bridge (`settle = "target"`), not a part of it: it
speaks the bridge's envelope and reads its numbers from `BridgePolicy`, both
imported from `band_trio.bridge` as any target would import them, and so sits
a layer above the bridge, which never imports it. See docs/how-to/bridge.md.
"""

from __future__ import annotations

from ._app import HostApp as HostApp
from ._serve import serve_host as serve_host

__all__ = ["HostApp", "serve_host"]
