"""`UpstreamPolicy` from the environment: how `band-trio agent` and the reference
adapters' factories take retry, timeout and size settings without code.

Each field of `UpstreamPolicy` is one variable, its name upper-cased after a
prefix: `BAND_UPSTREAM_` for the agent's own `Policy.upstream` (every adapter
without settings of its own), `BAND_OPENAI_`, `BAND_ANTHROPIC_`, `BAND_A2A_`,
`BAND_OPENCODE_` for one reference adapter — `BAND_OPENAI_READ_TIMEOUT=120`,
`BAND_A2A_ATTEMPTS=5`.
Each is read within its `Range` (`band_trio._ranges`, the rule for every number
read from outside).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from .._ranges import DAY, GIB, HOUR, Range, count, read_number, seconds
from ..errors import ConfigurationError
from ..policy import UpstreamPolicy

__all__ = ["UPSTREAM_RANGES", "UPSTREAM_SETTINGS", "upstream_from_env"]

UPSTREAM_SETTINGS = tuple(field.name for field in dataclasses.fields(UpstreamPolicy))
"""The field names, in order: each is `<PREFIX><NAME.upper()>` in the environment."""
UPSTREAM_RANGES: Mapping[str, Range] = {
    "attempts": count(100),
    "retry_base": seconds(60),
    "retry_cap": seconds(HOUR),
    "retry_after_cap": seconds(HOUR),
    "connect_timeout": seconds(HOUR, above=True),
    "read_timeout": seconds(DAY, above=True),
    "close_grace": seconds(HOUR),
    "drain_grace": seconds(HOUR),
    "discovery_deadline": seconds(HOUR),
    "check_grace": seconds(HOUR),
    "lookup_grace": seconds(HOUR),
    "confirm_share": Range(0, 1, unit="a share"),
    "confirm_cap": seconds(HOUR),
    "confirm_margin": seconds(HOUR),
    "resettle_grace": seconds(HOUR),
    "max_body": count(GIB),
    "max_error_body": count(GIB),
    "max_event": count(GIB),
    "max_answer_chars": count(GIB),
    "event_buffer": count(65_536),
}
"""What each `UpstreamPolicy` field may be set to from the environment
(docs/reference/adapters.md): a day of silence at most, an hour for any other wait,
100 attempts, a GiB for any size."""


def upstream_from_env(
    env: Mapping[str, str], prefix: str, base: UpstreamPolicy | None = None
) -> UpstreamPolicy | None:
    """The policy `base` (the defaults if None) with the fields set in `env` under
    `prefix` changed; None if none is set and there is no `base`.

    A value that is not a number in its field's `UPSTREAM_RANGES`, or that the policy
    refuses, is a `ConfigurationError` naming the variable."""
    changes: dict[str, float | int] = {}
    for name in UPSTREAM_SETTINGS:
        variable = f"{prefix}{name.upper()}"
        raw = env.get(variable, "").strip()
        if raw:
            changes[name] = read_number(variable, raw, UPSTREAM_RANGES[name])
    if not changes:
        return base
    try:
        return (base or UpstreamPolicy()).replace(**changes)
    except ValueError as exc:
        raise ConfigurationError(f"{prefix}*: {exc}") from None
