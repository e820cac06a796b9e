"""The client side of the Band protocol over trio: the websocket and the REST API."""

from __future__ import annotations

from ._http_pool import HttpPool as HttpPool
from ._rest import AMBIGUOUS_STATUSES as AMBIGUOUS_STATUSES
from ._rest import RestClient as RestClient
from ._rest import check_rest_url as check_rest_url
from ._rest import map_transport_errors as map_transport_errors
from ._socket import CLOSE_HEARTBEAT_DEAD as CLOSE_HEARTBEAT_DEAD
from ._socket import PushHandler as PushHandler
from ._socket import ReplyHandler as ReplyHandler
from ._socket import Socket as Socket
from ._socket import SocketStats as SocketStats
from ._socket import check_ws_url as check_ws_url
from ._socket import run_socket as run_socket
from ._status import error_for_status as error_for_status

__all__ = [
    "AMBIGUOUS_STATUSES",
    "CLOSE_HEARTBEAT_DEAD",
    "HttpPool",
    "PushHandler",
    "ReplyHandler",
    "RestClient",
    "Socket",
    "SocketStats",
    "check_rest_url",
    "check_ws_url",
    "error_for_status",
    "map_transport_errors",
    "run_socket",
]
