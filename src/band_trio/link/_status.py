"""Turning an HTTP error status and its envelope into one band-trio error.

Shared by the REST client and the websocket upgrade, so a 401 is an
`AuthenticationError` whichever of the two met it.
"""

from __future__ import annotations

import msgspec

from .. import errors
from ..wire import ErrorEnvelope

__all__ = ["error_for_status", "parse_retry_after"]

_envelope = msgspec.json.Decoder(ErrorEnvelope)

_BY_STATUS: dict[int, type[errors.PlatformResponseError]] = {
    401: errors.AuthenticationError,
    404: errors.NotFoundError,
    409: errors.ConflictError,
    429: errors.RateLimitedError,
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds form only), or None."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def error_for_status(
    status: int, body: bytes | None, retry_after_header: str | None = None
) -> errors.PlatformResponseError:
    """The most specific `PlatformResponseError` for a status and its (optional) envelope."""
    code: str | None = None
    message = f"HTTP {status}"
    request_id: str | None = None
    retry_after = parse_retry_after(retry_after_header)
    if body:
        try:
            envelope = _envelope.decode(body)
        except msgspec.DecodeError:
            message = body[:200].decode("utf-8", "replace")
        else:
            code = envelope.error.code
            message = envelope.error.message
            request_id = envelope.error.request_id
            if retry_after is None and envelope.error.retry_after is not None:
                retry_after = float(envelope.error.retry_after)
    kind = _BY_STATUS.get(status, errors.PlatformResponseError)
    if status == 403 and "execution is stopped" in message.lower():
        kind = errors.ExecutionStoppedError
    return kind(status, message, code=code, request_id=request_id, retry_after=retry_after)
