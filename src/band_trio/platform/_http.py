"""The few HTTP pieces the routes share: a response, an error, JSON in and out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from ..wire import ErrorBody, ErrorEnvelope

__all__ = [
    "NO_CONTENT",
    "ClientGone",
    "HttpError",
    "Response",
    "decode_body",
    "error_body",
    "json_response",
    "read_body",
]

T = TypeVar("T")

_encoder = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    """Extra headers (content-type and content-length are always added)."""


NO_CONTENT = Response(204)


class HttpError(Exception):
    """Raised by a route to answer with an error envelope."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


def json_response(value: Any, status: int = 200) -> Response:
    return Response(status, _encoder.encode(value))


def error_body(
    code: str,
    message: str,
    request_id: str,
    details: dict[str, Any] | None = None,
    retry_after: int | None = None,
) -> bytes:
    """`{"error": {"code", "message", "request_id"[, "details"][, "retry_after"]}}`."""
    body = ErrorBody(
        code=code, message=message, request_id=request_id, details=details, retry_after=retry_after
    )
    return _encoder.encode(ErrorEnvelope(error=body))


def decode_body(body: bytes, kind: type[T]) -> T:
    """Decode a JSON body: 400 when it is not JSON, 422 when it misses the schema."""
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        raise HttpError(422, "validation_error", str(exc)) from None
    except msgspec.DecodeError as exc:
        raise HttpError(400, "bad_request", f"malformed JSON body: {exc}") from None
    except RecursionError:
        raise HttpError(400, "bad_request", "malformed JSON body: nested too deeply") from None


class ClientGone(Exception):
    """The client went away before its request body was complete."""


async def read_body(scope: dict[str, Any], receive: Any, limit: int) -> bytes | None:
    """An ASGI request's body, or None if it is over `limit` bytes (not read further:
    the connection is closed after the 413, so the rest is never buffered)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                if int(value) > limit:
                    return None
            except ValueError:
                return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
