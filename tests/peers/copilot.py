"""The GitHub Copilot CLI 1.0.102 as a local test peer, with stubllm as its model (BYOK).

    from peers import stubllm_peer
    from peers.copilot import copilot_config

    async with stubllm_peer() as llm:
        config = copilot_config(llm)                  # CopilotConfig for the real CLI
        cli = CopilotCli(config)
        async with cli.running():
            ...

The binary is the one `python3 dev.py test` installs with npm into `.tools/copilot` (it
passes the path as ``BAND_TRIO_COPILOT``; without it the install stamp there is read). A
missing binary is a `PeerError` naming the fix: the Copilot tests fail, they never skip.

The CLI runs offline: the adapter starts it with ``COPILOT_OFFLINE=true`` and the provider
``openai`` at stubllm's ``/v1``, in folders of its own (see `band_trio.adapters._copilot_cli`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from band_trio.adapters import CopilotConfig

from .fixtures import Peer, installed_binary

REPO = Path(__file__).resolve().parents[2]
VERSION = "1.0.102"
STAMP = REPO / ".tools" / "copilot" / ".band-trio-installed"
MODEL = "gpt-4o"


def copilot_binary() -> Path:
    """The CLI binary: ``BAND_TRIO_COPILOT``, else the one dev.py's stamp names."""
    return installed_binary("BAND_TRIO_COPILOT", STAMP, VERSION, "@github/copilot")


def copilot_config(llm: Peer, **overrides: Any) -> CopilotConfig:
    """Settings for the real CLI with `llm` (a stubllm peer) as its model server."""
    settings: dict[str, Any] = {
        "cli": str(copilot_binary()),
        "model": MODEL,
        "base_url": llm.base_url,
        "api_key": "sk-stub",
        "start_deadline": 30.0,
        "kill_grace": 2.0,
    }
    return CopilotConfig(**{**settings, **overrides})
