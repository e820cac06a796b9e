"""A request's body must arrive within a deadline (`ServerPolicy.body_read`).

A client that sends its headers and then its body a byte a minute (or never)
would hold a handler for as long as it likes: hypercorn has a read timeout,
but one per read and for the whole connection, which would also end every
server-sent event stream and websocket whose client sends nothing. So the
deadline is on the body alone: the app's `receive` is wrapped, and until the
body is complete each receive waits at most until `body_read` after the
request began. Past it the app sees `http.disconnect` (it stops as if the
client had gone) and, if it had not answered yet, the server answers 408 and
closes the connection. Once the body is in, `receive` is the server's own
again (an app waiting for the client to go away waits unbounded, as it must).
"""

from __future__ import annotations

from typing import Any

import trio

__all__ = ["BodyDeadline"]

_GONE = {"type": "http.disconnect"}


class BodyDeadline:
    """`receive` for one request, its body bounded; `expired` once it ran out."""

    __slots__ = ("_deadline", "_receive", "done", "expired")

    def __init__(self, receive: Any, within: float) -> None:
        self._receive = receive
        self._deadline = trio.current_time() + within
        self.done = False
        self.expired = False

    async def receive(self) -> Any:
        if self.done:
            return await self._receive()
        with trio.move_on_at(self._deadline):
            message = await self._receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                self.done = True
            return message
        self.done = self.expired = True
        return _GONE
