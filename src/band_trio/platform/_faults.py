"""Fault injection: break the platform on purpose, so runtime tests can watch recovery.

`platform.faults` (a `Faults`) arms REST faults (fail, hold, delay) per route
(`_faults_rest`), and websocket faults (`_faults_socket`): it refuses upgrades
or the joins of a topic, drops or closes a live socket, mutes heartbeats and
pushes `supersede`. Every fault that takes effect is appended to the request
log as a `note` whose body starts with `"fault:"`, and counted in the stats
(`faults` plus one `faults_*` counter per kind). The admin API drives the
same object from another process (`POST /_admin/faults/...`).
"""

from __future__ import annotations

from ._fault_log import FaultLog
from ._faults_rest import REST_ROUTES, Hold, Intercepted, RestFault, RestFaults
from ._faults_socket import JoinRefusal, SocketFaults
from ._hub import Hub
from ._log import RequestLog

__all__ = ["REST_ROUTES", "Faults", "Hold", "Intercepted", "JoinRefusal", "RestFault"]


class Faults(RestFaults, SocketFaults):
    """The fault injector at `platform.faults`; also driven by `POST /_admin/faults/...`.

    Unknown routes, statuses out of range and the like raise `ValueError`;
    `supersede` on an agent without a live socket raises `LookupError`.
    """

    def __init__(self, log: RequestLog, hub: Hub) -> None:
        self.rest = []
        self.processed_terminal = False
        self.upgrades = 0
        self.muting = False
        self.joins = {}
        self._faults_log = FaultLog(log)
        self._hub = hub
        self._upgrade_status = 503
        self._upgrade_body = None
        self._upgrade_retry_after = None
        self._mute_all = False
        self._muted = set()
        self._holds = []

    def clear(self) -> None:
        """Disarm everything and release every held request."""
        self.rest = []
        self.processed_terminal = False
        for hold in list(self._holds):
            hold.release()
        self.upgrades = 0
        self.joins.clear()
        self._mute_all = False
        self._muted.clear()
        self.muting = False
