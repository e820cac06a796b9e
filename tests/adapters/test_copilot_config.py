"""The Copilot adapter's settings: `BAND_COPILOT_*`, and what a bad one says (no CLI run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from band_trio.adapters import CopilotAdapter, CopilotConfig, copilot
from band_trio.errors import ConfigurationError

BASE = {
    "BAND_COPILOT_CLI": "/bin/sh",  # any executable: nothing is run here
    "BAND_COPILOT_MODEL": "gpt-4o",
    "BAND_COPILOT_BASE_URL": "http://127.0.0.1:11434/v1",
}


def test_the_factory_reads_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name, value in {
        **BASE,
        "BAND_COPILOT_API_KEY": "sk-1",
        "BAND_COPILOT_PROVIDER": "anthropic",
        "BAND_COPILOT_WIRE_API": "responses",
        "BAND_COPILOT_WORKDIR": str(tmp_path),
        "BAND_COPILOT_HOME": str(tmp_path),
        "BAND_COPILOT_ALLOW": " Read, url ",
        "BAND_COPILOT_MAX_RETRIES": "0",
    }.items():
        monkeypatch.setenv(name, value)
    adapter = copilot()
    assert isinstance(adapter, CopilotAdapter)
    config = adapter.config
    assert (config.cli, config.model, config.base_url) == (
        "/bin/sh",
        "gpt-4o",
        "http://127.0.0.1:11434/v1",
    )
    assert (config.api_key, config.provider_type, config.wire_api) == (
        "sk-1",
        "anthropic",
        "responses",
    )
    assert config.working_directory == config.home == str(tmp_path)
    assert config.allow == {"read", "url"} and config.max_retries == 0
    assert "sk-1" not in repr(config)


def test_the_defaults_are_safe() -> None:
    config = CopilotConfig.from_env(BASE)
    assert config.allow == frozenset()  # every tool permission is denied
    assert config.working_directory is None and config.home is None  # new folders per run
    assert CopilotConfig.from_env({**BASE, "BAND_COPILOT_ALLOW": "none"}).allow == frozenset()
    assert config.permissions == "allow-list" and config.ask_within is None  # nobody asked


def test_asking_the_room_is_chosen_by_its_variables() -> None:
    env = {**BASE, "BAND_COPILOT_PERMISSIONS": "Ask", "BAND_COPILOT_ASK_WITHIN": "90"}
    config = CopilotConfig.from_env(env)
    assert (config.permissions, config.ask_within) == ("ask", 90.0)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"BAND_COPILOT_MODEL": ""}, "BAND_COPILOT_MODEL is required"),
        ({"BAND_COPILOT_BASE_URL": " "}, "BAND_COPILOT_BASE_URL is required"),
        ({"BAND_COPILOT_BASE_URL": "127.0.0.1:11434"}, "provider URL must be http(s)://"),
        ({"BAND_COPILOT_CLI": "/nonexistent/copilot"}, "'/nonexistent/copilot' is not a file"),
        ({"BAND_COPILOT_PROVIDER": "github"}, "provider type must be one of"),
        ({"BAND_COPILOT_WIRE_API": "grpc"}, "wire API must be one of"),
        ({"BAND_COPILOT_WORKDIR": "."}, "working directory must be an absolute path"),
        ({"BAND_COPILOT_WORKDIR": "/nonexistent/dir"}, "'/nonexistent/dir' is not a folder"),
        ({"BAND_COPILOT_HOME": "state"}, "home must be an absolute path"),
        ({"BAND_COPILOT_ALLOW": "shell,sudo"}, "unknown Copilot permission kind(s) ['sudo']"),
        ({"BAND_COPILOT_MAX_RETRIES": "-1"}, "BAND_COPILOT_MAX_RETRIES must be a whole number"),
        ({"BAND_COPILOT_MAX_RETRIES": "two"}, "BAND_COPILOT_MAX_RETRIES must be a whole number"),
        ({"BAND_COPILOT_PERMISSIONS": "yolo"}, "permissions must be one of ('allow-list', 'ask')"),
        ({"BAND_COPILOT_ASK_WITHIN": "0"}, "BAND_COPILOT_ASK_WITHIN must be"),
    ],
)
def test_a_bad_setting_is_one_clear_error(change: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        CopilotConfig.from_env({**BASE, **change})
    assert says in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_cli_that_is_not_executable_is_named(tmp_path: Path) -> None:
    plain = tmp_path / "copilot"
    plain.write_text("not a program")
    plain.chmod(0o644)
    with pytest.raises(ConfigurationError, match="is not executable"):
        CopilotConfig.from_env({**BASE, "BAND_COPILOT_CLI": str(plain)})


def test_without_a_cli_setting_the_one_on_path_is_used_or_named(tmp_path: Path) -> None:
    env = {k: v for k, v in BASE.items() if k != "BAND_COPILOT_CLI"}
    old = os.environ.get("PATH", "")
    try:
        os.environ["PATH"] = str(tmp_path)
        with pytest.raises(ConfigurationError, match="no `copilot` is on PATH"):
            CopilotConfig.from_env(env)
        fake = tmp_path / "copilot"
        fake.write_text("#!/bin/sh\n")
        fake.chmod(0o755)
        assert CopilotConfig.from_env(env).cli == str(fake)
    finally:
        os.environ["PATH"] = old


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("kill_grace", 0),
        ("start_deadline", -1),
        ("max_frame_bytes", 0),
        ("outbox", 0),
        ("seen_messages", 0),
    ],
)
def test_limits_must_be_positive(field: str, value: float) -> None:
    with pytest.raises(ConfigurationError, match=field):
        CopilotConfig(cli="/bin/sh", model="m", base_url="http://x/v1", **{field: value})
