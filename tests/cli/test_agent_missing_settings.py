"""`band-trio agent` without its settings: one line naming where each comes from, exit 2.

docs/tutorial/getting-started.md ran `band-trio agent --adapter my_adapter:make` with
no settings at all, and read `agent_id is required` (exit 2), which names neither
`--agent-id`, `BAND_AGENT_ID` nor `--ready-file`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BAND_TRIO = [sys.executable, "-m", "band_trio"]
WHERE = {
    "agent id": ("--agent-id", "BAND_AGENT_ID"),
    "API key": ("--api-key", "BAND_API_KEY"),
    "REST URL": ("--rest-url", "BAND_REST_URL"),
    "websocket URL": ("--ws-url", "BAND_WS_URL"),
}


def agent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
    return subprocess.run(
        [*BAND_TRIO, "agent", *args],
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_with_no_settings_it_names_every_flag_variable_and_the_ready_file() -> None:
    done = agent("--adapter", "band_trio.adapters:demo")
    assert done.returncode == 2, done
    (line,) = done.stderr.splitlines()
    assert "Traceback" not in done.stderr and not done.stdout
    for what, (flag, variable) in WHERE.items():
        assert what in line and flag in line and variable in line, line
    assert "--ready-file" in line and "band-trio platform" in line, line


@pytest.mark.parametrize("missing", list(WHERE))
def test_one_missing_setting_is_named_alone(missing: str) -> None:
    given = {variable: "x" for what, (_, variable) in WHERE.items() if what != missing}
    given["BAND_REST_URL"] = "http://127.0.0.1:9"
    given["BAND_WS_URL"] = "ws://127.0.0.1:9/socket"
    given.pop(WHERE[missing][1], None)
    done = agent(env=given)
    assert done.returncode == 2, done
    (line,) = done.stderr.splitlines()
    flag, variable = WHERE[missing]
    assert f"no {missing}" in line and flag in line and variable in line, line
    for other, (other_flag, _) in WHERE.items():
        if other != missing:
            assert other_flag not in line, line


def test_a_ready_file_gives_what_the_flags_do_not(tmp_path: Path) -> None:
    """Settings from the file pass the check: the agent then tries the (absent) platform."""
    ready = tmp_path / "band.json"
    ready.write_text(
        '{"rest_url": "http://127.0.0.1:9", "ws_url": "ws://127.0.0.1:9/socket",'
        ' "admin_url": "http://127.0.0.1:9/_admin", "agent_id": "a", "api_key": "k"}'
    )
    done = agent("--ready-file", str(ready))
    assert "no agent id" not in done.stderr and "--agent-id" not in done.stderr, done.stderr
