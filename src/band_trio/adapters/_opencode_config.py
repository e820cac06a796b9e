"""The OpenCode adapter configured from the environment (`band_trio.adapters:opencode`)."""

from __future__ import annotations

import os

from ..errors import ConfigurationError
from ._opencode import OpenCodeAdapter
from ._opencode_permissions import check_mode
from ._settings import adapter_upstream

__all__ = ["opencode"]


def opencode() -> OpenCodeAdapter:
    """The adapter configured from the environment (for `--adapter band_trio.adapters:opencode`).

    `BAND_OPENCODE_URL` (required, e.g. `http://127.0.0.1:4096`), `BAND_OPENCODE_MODEL`
    (required, `provider/model` as OpenCode names it, e.g. `anthropic/claude-sonnet-4`),
    `BAND_OPENCODE_PASSWORD` (the server's basic-auth password, if it has one) and
    `BAND_OPENCODE_DIRECTORY` (the sessions' project directory; default the server's) and
    `BAND_OPENCODE_PERMISSIONS` (who answers OpenCode's permission requests: `ask` the
    room, the default; `deny`; `ignore`, left to another OpenCode client).
    Retries, timeouts and read limits: `BAND_OPENCODE_<FIELD>` for each
    `UpstreamPolicy` field (`BAND_OPENCODE_READ_TIMEOUT`, …) over `BAND_UPSTREAM_<FIELD>`."""
    env = {k: v.strip() for k, v in os.environ.items() if k.startswith("BAND_OPENCODE_")}
    url = env.get("BAND_OPENCODE_URL")
    if not url:
        raise ConfigurationError("BAND_OPENCODE_URL is not set (e.g. http://127.0.0.1:4096)")
    model = env.get("BAND_OPENCODE_MODEL") or ""
    provider_id, _, model_id = model.partition("/")
    if not provider_id or not model_id:
        raise ConfigurationError(
            f"BAND_OPENCODE_MODEL must be provider/model (e.g. anthropic/claude-sonnet-4),"
            f" not {model!r}"
        )
    try:
        permissions = check_mode(env.get("BAND_OPENCODE_PERMISSIONS") or "ask")
    except ConfigurationError as exc:
        raise ConfigurationError(f"BAND_OPENCODE_PERMISSIONS: {exc}") from None
    try:
        return OpenCodeAdapter(
            url,
            provider_id=provider_id,
            model_id=model_id,
            password=os.environ.get("BAND_OPENCODE_PASSWORD") or None,
            directory=env.get("BAND_OPENCODE_DIRECTORY") or None,
            permissions=permissions,
            upstream=adapter_upstream("BAND_OPENCODE_"),
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"BAND_OPENCODE_URL: {exc}") from None
