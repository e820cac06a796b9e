"""The embedded Band platform: a faithful local stand-in for the real one.

It speaks the Band wire protocol (agent REST API and Phoenix V2 websocket, as
docs/reference/platform.md describes them) on loopback, keeps its state in
sqlite (in memory, or durable in a file), and adds an admin API and an
in-process `Platform` object to drive it: post messages, send controls, watch
deliveries, read the request log.

    async with open_platform() as platform:
        ...platform.info.rest_url, platform.post_message(...), await platform.wait_until(...)
        platform.faults.fail_rest("processed", 503)   # fault injection
"""

from __future__ import annotations

from ._faults import REST_ROUTES as REST_ROUTES
from ._faults import Faults as Faults
from ._faults import Hold as Hold
from ._faults import JoinRefusal as JoinRefusal
from ._platform import Platform as Platform
from ._server import open_platform as open_platform
from ._server import run_platform as run_platform

__all__ = [
    "REST_ROUTES",
    "Faults",
    "Hold",
    "JoinRefusal",
    "Platform",
    "open_platform",
    "run_platform",
]
