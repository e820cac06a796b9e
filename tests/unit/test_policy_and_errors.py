"""The policy object and the HTTP-status seam."""

from __future__ import annotations

import pytest

from band_trio import Policy, errors
from band_trio.link import error_for_status


def test_defaults_match_the_contract() -> None:
    policy = Policy()
    assert (policy.max_attempts, policy.cleanup_grace, policy.shutdown_grace) == (1, 1.0, 30.0)
    assert (policy.heartbeat_interval, policy.heartbeat_dead_after) == (30.0, 60.0)
    assert policy.replace(max_attempts=3).max_attempts == 3


@pytest.mark.parametrize("change", [{"cleanup_grace": -1}, {"max_attempts": 0}])
def test_invalid_policies_are_refused(change: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="Policy"):
        Policy(**change)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            401,
            b'{"error":{"code":"unauthorized","message":"bad key","request_id":"r"}}',
            errors.AuthenticationError,
        ),
        (
            403,
            b'{"error":{"code":"forbidden","message":"Agent execution is stopped",'
            b'"request_id":"r"}}',
            errors.ExecutionStoppedError,
        ),
        (
            403,
            b'{"error":{"code":"forbidden","message":"nope","request_id":"r"}}',
            errors.PlatformResponseError,
        ),
        (404, None, errors.NotFoundError),
        (
            409,
            b'{"error":{"code":"connection_conflict","message":"taken","request_id":null}}',
            errors.ConflictError,
        ),
        (500, b"<html>oops</html>", errors.PlatformResponseError),
    ],
)
def test_statuses_map_to_the_most_specific_error(
    status: int, body: bytes | None, kind: type[errors.PlatformResponseError]
) -> None:
    error = error_for_status(status, body)
    assert type(error) is kind
    assert error.status == status


def test_retry_after_comes_from_the_header_or_the_envelope() -> None:
    assert error_for_status(429, None, "2").retry_after == 2.0
    body = b'{"error":{"code":"rate","message":"slow","request_id":"r","retry_after":7}}'
    assert error_for_status(429, body).retry_after == 7.0
