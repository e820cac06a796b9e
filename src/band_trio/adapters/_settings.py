"""What the reference adapters' factories read from the environment, shared."""

from __future__ import annotations

import os

from ..contract import upstream_from_env
from ..policy import UpstreamPolicy

__all__ = ["adapter_upstream"]


def adapter_upstream(prefix: str) -> UpstreamPolicy | None:
    """A reference adapter's `UpstreamPolicy` from the environment: `BAND_UPSTREAM_*`
    (the agent's, as `band-trio agent` reads them), then `<prefix>*` (the adapter's
    own, e.g. `BAND_OPENAI_READ_TIMEOUT`) over it; None if neither is set, so the
    agent's `Policy.upstream` applies."""
    agent = upstream_from_env(os.environ, "BAND_UPSTREAM_")
    return upstream_from_env(os.environ, prefix, agent)
