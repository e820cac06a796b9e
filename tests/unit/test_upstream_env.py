"""`UpstreamPolicy` from `BAND_*` variables: the agent's (`BAND_UPSTREAM_*`, read by
`band-trio agent`, `bridge`, `host`) and each reference adapter's over it."""

from __future__ import annotations

import pytest

from band_trio import UpstreamPolicy
from band_trio.adapters import a2a, openai_chat, opencode
from band_trio.cli._agent import upstream_policy
from band_trio.contract import UPSTREAM_SETTINGS, upstream_from_env
from band_trio.contract._env import UPSTREAM_RANGES
from band_trio.errors import ConfigurationError


def test_each_field_is_a_variable_and_unset_means_no_override() -> None:
    assert upstream_from_env({}, "BAND_OPENAI_") is None
    env = {"BAND_OPENAI_READ_TIMEOUT": "120", "BAND_OPENAI_ATTEMPTS": "5", "OTHER": "1"}
    assert upstream_from_env(env, "BAND_OPENAI_") == UpstreamPolicy(read_timeout=120, attempts=5)
    base = UpstreamPolicy(retry_cap=2)
    assert upstream_from_env({}, "BAND_A2A_", base) is base
    assert "read_timeout" in UPSTREAM_SETTINGS and "max_body" in UPSTREAM_SETTINGS


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("BAND_A2A_ATTEMPTS", "two", "BAND_A2A_ATTEMPTS must be a whole number from 1 to 100"),
        ("BAND_A2A_ATTEMPTS", "0", "BAND_A2A_ATTEMPTS must be a whole number from 1 to 100"),
        ("BAND_A2A_READ_TIMEOUT", "soon", "BAND_A2A_READ_TIMEOUT must be seconds over 0"),
        ("BAND_A2A_READ_TIMEOUT", "inf", "must be seconds over 0 and at most 86400"),
        ("BAND_A2A_READ_TIMEOUT", "0", "must be seconds over 0 and at most 86400"),
        ("BAND_A2A_RETRY_BASE", "-1", "BAND_A2A_RETRY_BASE must be seconds from 0 to 60"),
    ],
)
def test_a_bad_value_is_a_configuration_error_naming_it(name: str, value: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        upstream_from_env({name: value}, "BAND_A2A_")


HUGE = ["1e23", "100000000000000000000000", "9223372036854775807", "inf", "-inf", "nan", "1e400"]
"""Values that turned a deadline or a cap off (issue 38, item 7g): each is refused."""


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize("field", UPSTREAM_SETTINGS)
def test_every_setting_has_a_finite_upper_bound(field: str, value: str) -> None:
    variable = f"BAND_UPSTREAM_{field.upper()}"
    with pytest.raises(ConfigurationError, match=f"{variable} must be .* to |and at most "):
        upstream_from_env({variable: value}, "BAND_UPSTREAM_")


def test_each_bound_is_taken_and_one_past_it_is_not() -> None:
    for field in UPSTREAM_SETTINGS:
        allowed = UPSTREAM_RANGES[field]
        variable = f"BAND_X_{field.upper()}"
        top = str(int(allowed.high) if allowed.whole else allowed.high)
        policy = upstream_from_env({variable: top}, "BAND_X_")
        assert policy is not None and getattr(policy, field) == allowed.high
        past = str(int(allowed.high) + 1 if allowed.whole else allowed.high * 1.01)
        with pytest.raises(ConfigurationError, match=f"{variable} must be"):
            upstream_from_env({variable: past}, "BAND_X_")


def test_the_factories_take_the_agents_then_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAND_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BAND_A2A_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("BAND_OPENCODE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("BAND_OPENCODE_MODEL", "stub/gpt")
    assert openai_chat().upstream is None  # the agent's Policy.upstream applies
    monkeypatch.setenv("BAND_UPSTREAM_ATTEMPTS", "4")
    monkeypatch.setenv("BAND_OPENAI_READ_TIMEOUT", "90")
    assert openai_chat().upstream == UpstreamPolicy(attempts=4, read_timeout=90)
    assert a2a().upstream == UpstreamPolicy(attempts=4)
    monkeypatch.setenv("BAND_OPENCODE_ATTEMPTS", "1")
    assert opencode().upstream == UpstreamPolicy(attempts=1)
    assert upstream_policy() == UpstreamPolicy(attempts=4)
    monkeypatch.setenv("BAND_OPENAI_MAX_BODY", "lots")
    with pytest.raises(ConfigurationError, match="BAND_OPENAI_MAX_BODY"):
        openai_chat()


@pytest.mark.parametrize("value", ["100000000000000000000000", "1e23", "10001", "1", "²"])
def test_openais_history_is_bounded(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """ "²" is a digit to `str.isdigit`, not to `int`: it was a ValueError traceback."""
    monkeypatch.setenv("BAND_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BAND_OPENAI_MAX_HISTORY", value)
    with pytest.raises(ConfigurationError, match="BAND_OPENAI_MAX_HISTORY must be a whole number"):
        openai_chat()


@pytest.mark.parametrize("value", ["100000000000000000000000", "101", "-1", "²"])
def test_copilots_retries_are_bounded(value: str) -> None:
    from band_trio.adapters import CopilotConfig

    env = {
        "BAND_COPILOT_CLI": "/bin/true",
        "BAND_COPILOT_MODEL": "m",
        "BAND_COPILOT_BASE_URL": "http://127.0.0.1:9/v1",
        "BAND_COPILOT_MAX_RETRIES": value,
    }
    with pytest.raises(ConfigurationError, match="BAND_COPILOT_MAX_RETRIES must be a whole number"):
        CopilotConfig.from_env(env)


@pytest.mark.parametrize("value", ["inf", "nan", "1e23", "0", "61"])
def test_a2as_poll_interval_is_bounded(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("BAND_A2A_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("BAND_A2A_POLL_INTERVAL", value)
    with pytest.raises(ConfigurationError, match="BAND_A2A_POLL_INTERVAL must be seconds over 0"):
        a2a()


@pytest.mark.parametrize("value", ["inf", "1e23", "3601", "-1", "nan"])
def test_the_agents_shutdown_grace_is_bounded(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from band_trio.cli._agent import _shutdown_grace

    monkeypatch.setenv("BAND_SHUTDOWN_GRACE", value)
    with pytest.raises(ConfigurationError, match=r"\(BAND_SHUTDOWN_GRACE\) must be seconds from 0"):
        _shutdown_grace(None)
    assert _shutdown_grace("3600") == 3600
