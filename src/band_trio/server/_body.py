"""Reading a request body with a limit, for every band-trio server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["BodyTooLarge", "ClientGone", "read_body"]


class ClientGone(Exception):
    """The client went away before its request body was complete."""


class BodyTooLarge(Exception):
    """The body is (or says it is) over the limit; the rest of it was not read.

    Answer it with `connection: close` (`Response.closing`): the unread rest must
    never be parsed as the next request."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body over {limit} bytes")
        self.limit = limit


async def read_body(scope: Mapping[str, Any], receive: Any, limit: int) -> bytes:
    """The request's body, at most `limit` bytes: a `Content-Length` over it is refused
    before anything is read, a body that grows past it as soon as it does."""
    for name, value in scope["headers"]:
        if name == b"content-length" and (
            not value.isdigit() or len(value) > 18 or int(value) > limit
        ):
            raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
