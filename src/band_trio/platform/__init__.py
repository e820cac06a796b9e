"""The embedded Band platform: a faithful local stand-in for the real one.

It speaks the wire protocol of spec/wire.md (agent REST API and Phoenix V2
websocket) on loopback, keeps its state in sqlite (in memory, or durable in a
file), and adds an admin API and an in-process `Platform` object to drive it:
post messages, send controls, watch deliveries, read the request log.

    async with open_platform() as platform:
        ...platform.info.rest_url, platform.post_message(...), await platform.wait_until(...)
"""

from __future__ import annotations

from ._platform import Platform as Platform
from ._server import open_platform as open_platform
from ._server import run_platform as run_platform

__all__ = ["Platform", "open_platform", "run_platform"]
