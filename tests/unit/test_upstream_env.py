"""`UpstreamPolicy` from `BAND_*` variables: the agent's (`BAND_UPSTREAM_*`, read by
`band-trio agent`, `bridge`, `host`) and each reference adapter's over it."""

from __future__ import annotations

import pytest

from band_trio import UpstreamPolicy
from band_trio.adapters import a2a, openai_chat, opencode
from band_trio.cli._agent import upstream_policy
from band_trio.contract import UPSTREAM_SETTINGS, upstream_from_env
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
        ("BAND_A2A_ATTEMPTS", "two", "BAND_A2A_ATTEMPTS must be a whole number"),
        ("BAND_A2A_ATTEMPTS", "0", "attempts must be >= 1"),
        ("BAND_A2A_READ_TIMEOUT", "soon", "BAND_A2A_READ_TIMEOUT must be seconds"),
        ("BAND_A2A_READ_TIMEOUT", "inf", "must be finite"),
        ("BAND_A2A_READ_TIMEOUT", "0", "read_timeout must be > 0"),
        ("BAND_A2A_RETRY_BASE", "-1", "must be a number >= 0"),
    ],
)
def test_a_bad_value_is_a_configuration_error_naming_it(name: str, value: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        upstream_from_env({name: value}, "BAND_A2A_")


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
