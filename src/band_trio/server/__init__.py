"""The one HTTP server seam of band-trio: binds, browser defences, bounded sends.

The embedded platform (REST, websocket, admin API, console), the runs API, the
bridge's health endpoint and the host all listen through `serve`, so what the
design asks of a server that another process or a web page can reach holds
in one place:

* loopback by default, anything else an explicit opt-in (`check_bind`), and a
  secret wherever another process can run work (`check_secret`);
* a Host allow-list against DNS rebinding, same-origin only, JSON bodies only,
  no framing (`Guard`), before the app sees a request;
* one way to answer (`answer`, `answer_json`) and one `HttpError` for every app
  served here, whatever its error envelope;
* a body limit (`read_body`), a websocket message cap held as the message is
  read (no permessage-deflate), every write bounded (`ServerPolicy`), and a
  graceful close with a deadline.

See docs/discussion/security.md for the threat model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy
from ._abort import abort_connection as abort_connection
from ._answer import JSON as JSON
from ._answer import Headers as Headers
from ._answer import HttpError as HttpError
from ._answer import Receive as Receive
from ._answer import Scope as Scope
from ._answer import Send as Send
from ._answer import answer as answer
from ._answer import answer_json as answer_json
from ._body import BodyTooLarge as BodyTooLarge
from ._body import ClientGone as ClientGone
from ._body import read_body as read_body
from ._guard import Guard as Guard
from ._guard import allowed_hosts as allowed_hosts
from ._listen import MIN_SECRET_LENGTH as MIN_SECRET_LENGTH
from ._listen import check_bind as check_bind
from ._listen import check_port as check_port
from ._listen import check_secret as check_secret
from ._listen import is_loopback as is_loopback
from ._listen import parse_listen as parse_listen

if TYPE_CHECKING:
    from ._serve import Listening as Listening
    from ._serve import ServeSettings as ServeSettings
    from ._serve import serve as serve

__all__ = [
    "JSON",
    "MIN_SECRET_LENGTH",
    "BodyTooLarge",
    "ClientGone",
    "Guard",
    "Headers",
    "HttpError",
    "Listening",
    "Receive",
    "Scope",
    "Send",
    "ServeSettings",
    "abort_connection",
    "allowed_hosts",
    "answer",
    "answer_json",
    "check_bind",
    "check_port",
    "check_secret",
    "is_loopback",
    "parse_listen",
    "read_body",
    "serve",
]

# hypercorn is imported when something serves, not when a command checks an address
__getattr__, __dir__ = lazy(
    __name__, dict.fromkeys(("Listening", "ServeSettings", "serve"), "._serve"), __all__
)
