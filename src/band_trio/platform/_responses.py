"""The responses the platform's routes return: a `Response` (status, body, extra
headers), JSON in and out, and the Band error envelope.

A route returns a `Response` rather than answering itself, so that the app can
log it, let an armed fault replace it, and answer it in one place (through the
server's `answer`); an error is the server's `HttpError`, rendered here with
the request's id (`error_body`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from ..server import HttpError
from ..wire import ErrorBody, ErrorEnvelope

__all__ = [
    "NO_CONTENT",
    "Response",
    "decode_body",
    "error_body",
    "json_response",
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
