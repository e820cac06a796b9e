"""Cutting the connection a request arrived on, without an answer.

ASGI gives an app no handle on its TCP connection: an app that returns without
answering gets hypercorn's 500, and one that raises gets the same. The embedded
platform's `drop` fault needs the one thing a real server does when it dies
between storing a message and answering: the client's request was handled, and
its connection then ends with nothing on it. The seam (`serve`) knows each
connection's socket, so it records it for the connection's tasks (a context
variable: hypercorn runs the app in a task its connection task spawned, which
inherits it), and `abort_connection` shuts it down both ways.
"""

from __future__ import annotations

import socket
from contextlib import suppress
from contextvars import ContextVar

import trio

__all__ = ["abort_connection", "connection_socket"]

connection_socket: ContextVar[trio.socket.SocketType | None] = ContextVar(
    "band_trio_connection_socket", default=None
)
"""The socket of the connection the current task serves (set by `serve`)."""


def abort_connection() -> bool:
    """Shut the current request's connection down both ways, before any answer: the
    client reads end of file, and hypercorn's later writes fail and end the
    connection. False when the task serves no connection of `serve`'s."""
    sock = connection_socket.get()
    if sock is None:
        return False
    with suppress(OSError):  # already gone: what the caller wanted
        sock.shutdown(socket.SHUT_RDWR)
    return True
