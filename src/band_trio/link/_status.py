"""Turning an HTTP error status and its envelope into one band-trio error.

Shared by the REST client and the websocket upgrade, so a 401 is an
`AuthenticationError` whichever of the two met it.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from .. import errors
from ..retry import retry_after_seconds
from ..wire import ErrorEnvelope

__all__ = ["Codes", "error_for_status", "parse_retry_after"]

_envelope = msgspec.json.Decoder(ErrorEnvelope)

Codes = Mapping[str, type[errors.PlatformResponseError]]
"""Envelope `code` -> the error it means."""

_BY_CODE: Codes = {
    "unauthorized": errors.AuthenticationError,
    "not_found": errors.NotFoundError,
    "connection_conflict": errors.ConflictError,
    "too_many_requests": errors.RateLimitedError,
    "rate_limited": errors.RateLimitedError,
}
"""What an envelope code means wherever it comes from."""

_BY_STATUS: dict[int, type[errors.PlatformResponseError]] = {
    401: errors.AuthenticationError,
    404: errors.NotFoundError,
    409: errors.ConflictError,
    429: errors.RateLimitedError,
}
"""The fallback for an answer without an envelope, or with a code not known here."""


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or an HTTP date), or None."""
    return retry_after_seconds(value)


def error_for_status(
    status: int,
    body: bytes | None,
    retry_after_header: str | None = None,
    codes: Codes | None = None,
) -> errors.PlatformResponseError:
    """The most specific `PlatformResponseError` for a status and its (optional) envelope.

    The envelope's `code` decides, looked up first in `codes` (what a code means
    on this one route, e.g. `forbidden` on a post is the stopped gate), then in
    the codes every route shares; the status decides only when there is no
    envelope or its code is unknown. The message text is never parsed."""
    code: str | None = None
    message = f"HTTP {status}"
    request_id: str | None = None
    retry_after = parse_retry_after(retry_after_header)
    if body:
        try:
            envelope = _envelope.decode(body)
        except (msgspec.DecodeError, RecursionError):
            message = body[:200].decode("utf-8", "replace")
        else:
            code = envelope.error.code
            message = envelope.error.message
            request_id = envelope.error.request_id
            if retry_after is None and envelope.error.retry_after is not None:
                retry_after = float(envelope.error.retry_after)
    kind = None
    if code is not None:
        kind = (codes or {}).get(code) or _BY_CODE.get(code)
    if kind is None:
        kind = _BY_STATUS.get(status, errors.PlatformResponseError)
    return kind(status, message, code=code, request_id=request_id, retry_after=retry_after)
