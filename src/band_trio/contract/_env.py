"""`UpstreamPolicy` from the environment: how `band-trio agent` and the reference
adapters' factories take retry, timeout and size settings without code.

Each field of `UpstreamPolicy` is one variable, its name upper-cased after a
prefix: `BAND_UPSTREAM_` for the agent's own `Policy.upstream` (every adapter
without settings of its own), `BAND_OPENAI_`, `BAND_A2A_`, `BAND_OPENCODE_` for
one reference adapter — `BAND_OPENAI_READ_TIMEOUT=120`, `BAND_A2A_ATTEMPTS=5`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from ..errors import ConfigurationError
from ..policy import UpstreamPolicy

__all__ = ["UPSTREAM_SETTINGS", "upstream_from_env"]

UPSTREAM_SETTINGS = tuple(field.name for field in dataclasses.fields(UpstreamPolicy))
"""The field names, in order: each is `<PREFIX><NAME.upper()>` in the environment."""
_COUNTS = frozenset(
    {"attempts", "max_body", "max_error_body", "max_event", "max_answer_chars", "event_buffer"}
)


def upstream_from_env(
    env: Mapping[str, str], prefix: str, base: UpstreamPolicy | None = None
) -> UpstreamPolicy | None:
    """The policy `base` (the defaults if None) with the fields set in `env` under
    `prefix` changed; None if none is set and there is no `base`.

    A value that is not a number of the right kind, or that the policy refuses, is a
    `ConfigurationError` naming the variable."""
    changes: dict[str, float | int] = {}
    for name in UPSTREAM_SETTINGS:
        variable = f"{prefix}{name.upper()}"
        raw = env.get(variable, "").strip()
        if not raw:
            continue
        try:
            value: float | int = int(raw) if name in _COUNTS else float(raw)
        except ValueError:
            kind = "a whole number" if name in _COUNTS else "seconds"
            raise ConfigurationError(f"{variable} must be {kind}, not {raw!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigurationError(f"{variable} must be finite, not {raw!r}")
        changes[name] = value
    if not changes:
        return base
    try:
        return (base or UpstreamPolicy()).replace(**changes)
    except ValueError as exc:
        raise ConfigurationError(f"{prefix}*: {exc}") from None
