"""An isolated, offline home for OpenCode with an OpenAI-compatible model server as its one
provider: what the ACP row of `band-trio bench` runs `opencode acp` in, and what the tests
run `opencode serve` and `opencode acp` in (tests/peers/opencode.py).

Under `root`: `home`, `config`, `data` (its sqlite database and `log/`), `cache`,
`state` and `project` (where it works), and an environment naming only those and
`PATH`: nothing of the caller's API keys. Its global `opencode.json` names one provider,
`stub` (`@ai-sdk/openai-compatible`, which the binary bundles: nothing is fetched for
it), whose `baseURL` is the model server, and `"model": "stub/<model>"`.

Offline on purpose. At every start OpenCode installs `@opencode-ai/plugin` into each
config directory in the background (64 MB from the npm registry) unless the directory
already has a `node_modules` and a `package-lock.json` whose root lists it: the config
directory is seeded with exactly that, so the install is skipped (the package is only
needed by plugins there, and there are none with `--pure`). As a guard,
`npm_config_registry` points at a closed loopback port, so a version that installs
anyway fails at once instead of reaching the network. `OPENCODE_DISABLE_MODELS_FETCH`
keeps it off models.dev; autoupdate, share, LSP downloads and the Claude Code
compatibility paths are off too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["OPENCODE_VERSION", "opencode_home"]

OPENCODE_VERSION = "1.18.33"
"""The version the layout was worked out with (and the tests install)."""


def opencode_home(
    root: Path, base_url: str, model: str, *, permission: dict[str, str] | None = None
) -> dict[str, str]:
    """Create the folders and the config under `root`; return OpenCode's environment.
    `permission`: OpenCode's per-tool rules (`{"bash": "ask"}`: each use is asked for)."""
    dirs = {name: root / name for name in ("home", "config", "data", "cache", "state", "project")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    config = dirs["config"] / "opencode"
    (config / "node_modules").mkdir(parents=True, exist_ok=True)  # with the lock: no install
    lock = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": OPENCODE_VERSION}}}}
    (config / "package-lock.json").write_text(json.dumps(lock))
    settings: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "stub": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "stubllm",
                "options": {"baseURL": base_url, "apiKey": "sk-stub"},
                "models": {model: {"name": model}},
            }
        },
        "model": f"stub/{model}",
    }
    if permission:
        settings["permission"] = permission
    (config / "opencode.json").write_text(json.dumps(settings, indent=1))
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(dirs["home"]),
        "XDG_CONFIG_HOME": str(dirs["config"]),
        "XDG_DATA_HOME": str(dirs["data"]),
        "XDG_CACHE_HOME": str(dirs["cache"]),
        "XDG_STATE_HOME": str(dirs["state"]),
        "OPENCODE_DISABLE_MODELS_FETCH": "true",
        "OPENCODE_DISABLE_AUTOUPDATE": "true",
        "OPENCODE_DISABLE_SHARE": "true",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "true",
        "OPENCODE_DISABLE_CLAUDE_CODE": "true",
        "npm_config_registry": "http://127.0.0.1:9/",  # a closed port: never the network
    }
