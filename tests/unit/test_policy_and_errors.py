"""The policy object and the HTTP-status seam."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import band_trio
from band_trio import Policy, UpstreamPolicy, errors
from band_trio.bridge import BridgePolicy
from band_trio.link import error_for_status
from band_trio.policy import PlatformPolicy


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
            errors.PlatformResponseError,  # what 403 means depends on the route
        ),
        (404, None, errors.NotFoundError),
        (
            404,
            b'{"error":{"code":"not_found","message":"no room","request_id":"r"}}',
            errors.NotFoundError,
        ),
        (
            409,
            b'{"error":{"code":"connection_conflict","message":"taken","request_id":null}}',
            errors.ConflictError,
        ),
        (
            503,
            b'{"error":{"code":"too_many_requests","message":"slow","request_id":"r"}}',
            errors.RateLimitedError,  # the code decides, not the status
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


def test_a_route_says_what_a_code_means_there_and_the_message_is_never_read() -> None:
    posts = {"forbidden": errors.ExecutionStoppedError}
    stopped = b'{"error":{"code":"forbidden","message":"Agent execution is stopped",'
    stopped += b'"request_id":"r"}}'
    assert type(error_for_status(403, stopped, None, posts)) is errors.ExecutionStoppedError
    # the same words under another code are not the stopped gate
    other = b'{"error":{"code":"no_access","message":"Agent execution is stopped",'
    other += b'"request_id":"r"}}'
    assert type(error_for_status(403, other, None, posts)) is errors.PlatformResponseError
    # and every link failure is a PlatformError: one class for callers to catch
    for kind in (errors.JoinError, errors.ConnectionClosedError, errors.ExecutionStoppedError):
        assert issubclass(kind, errors.PlatformError)


def test_retry_after_comes_from_the_header_or_the_envelope() -> None:
    assert error_for_status(429, None, "2").retry_after == 2.0
    body = b'{"error":{"code":"rate","message":"slow","request_id":"r","retry_after":7}}'
    assert error_for_status(429, body).retry_after == 7.0


def test_the_platform_policy_is_validated_like_the_agent_policy() -> None:
    policy = PlatformPolicy()
    assert (policy.close_grace, policy.supersede_close_delay, policy.outbound_queue) == (
        1.0,
        1.0,
        4096,
    )
    assert policy.replace(shutdown_deadline=1).shutdown_deadline == 1
    with pytest.raises(ValueError, match=r"PlatformPolicy\.close_grace"):
        PlatformPolicy(close_grace=-1)
    with pytest.raises(ValueError, match="outbound_queue"):
        PlatformPolicy(outbound_queue=0)
    with pytest.raises(ValueError, match=r"outbound_stall must be > 0"):
        PlatformPolicy(outbound_stall=0)
    with pytest.raises(ValueError, match="outbound_overflow"):
        PlatformPolicy(outbound_overflow=-1)
    assert PlatformPolicy(outbound_overflow=0).outbound_overflow == 0  # pushes never past it
    with pytest.raises(ValueError, match="listen_backlog"):
        PlatformPolicy(listen_backlog=0)


def test_the_rest_client_keeps_at_least_one_connection() -> None:
    assert Policy().rest_connections == 32
    with pytest.raises(ValueError, match="rest_connections"):
        Policy(rest_connections=0)


def test_every_policy_field_is_read_by_the_code() -> None:
    """A field nothing reads is a promise nothing keeps (band-sdk had such constants)."""
    read = {
        node.attr
        for path in Path(band_trio.__file__).parent.rglob("*.py")
        if path.name != "policy.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)  # code, not the docstrings that name them
    }
    for policy in (Policy, PlatformPolicy, UpstreamPolicy, BridgePolicy):
        for field in dataclasses.fields(policy):
            assert field.name in read, f"{policy.__name__}.{field.name} is read nowhere"


def test_the_upstream_policy_refuses_what_would_leave_a_wait_or_a_read_unbounded() -> None:
    assert Policy().upstream == UpstreamPolicy()
    assert Policy(upstream=UpstreamPolicy(attempts=5)).upstream.attempts == 5
    for bad in ({"attempts": 0}, {"read_timeout": 0}, {"max_body": 0}, {"confirm_share": 2}):
        with pytest.raises(ValueError):
            UpstreamPolicy(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="read_timeout"):
        UpstreamPolicy(read_timeout=-1)
    with pytest.raises(ValueError, match=r"Policy\.upstream"):
        Policy(upstream=3)  # type: ignore[arg-type]
    assert Policy().replace(upstream=UpstreamPolicy(attempts=2)).upstream.attempts == 2


@pytest.mark.parametrize(
    "url", ["notaurl", "ftp://h/", "http://", "http://h:port", "http://h:70000", "/api"]
)
def test_a_rest_url_no_call_could_reach_is_refused_when_the_agent_is_built(url: str) -> None:
    """`Agent(...)` checks its REST URL at once, as it checks the websocket URL, and so
    does a `RestClient` built on its own (each place a test of its own)."""
    from band_trio import Agent
    from band_trio.adapters import DemoAdapter
    from band_trio.errors import ConfigurationError
    from band_trio.link import RestClient

    with pytest.raises(ConfigurationError, match="not an http"):
        Agent(DemoAdapter(), agent_id="a", api_key="k", rest_url=url, ws_url="ws://h/")
    with pytest.raises(ConfigurationError, match="not an http"):
        RestClient(url, "k")
    Agent(DemoAdapter(), agent_id="a", api_key="k", rest_url="http://h:1/x", ws_url="ws://h/")
