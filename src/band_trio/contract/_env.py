"""`UpstreamPolicy` from the environment: how `band-trio agent` and the reference
adapters' factories take retry, timeout and size settings without code.

Each field of `UpstreamPolicy` is one variable, its name upper-cased after a
prefix: `BAND_UPSTREAM_` for the agent's own `Policy.upstream` (every adapter
without settings of its own), `BAND_OPENAI_`, `BAND_A2A_`, `BAND_OPENCODE_` for
one reference adapter — `BAND_OPENAI_READ_TIMEOUT=120`, `BAND_A2A_ATTEMPTS=5`.

Every number read from outside the code (a variable here, a flag's variable, a
bridge's config file) has a `Range`: finite, and bounded above, so that no
setting can turn a deadline or a cap off by being huge (`1e23` attempts, `inf`
seconds, 2**63 - 1 bytes). A value outside it is one `ConfigurationError` naming
the setting and the range.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import ConfigurationError
from ..policy import UpstreamPolicy

__all__ = [
    "DAY",
    "GIB",
    "HOUR",
    "UPSTREAM_RANGES",
    "UPSTREAM_SETTINGS",
    "Range",
    "count",
    "read_number",
    "seconds",
    "upstream_from_env",
]

HOUR = 3600.0
DAY = 86_400.0
GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Range:
    """The values a number read from outside may take: `low` to `high`, both finite;
    `whole` for a count; `above` when `low` itself is refused (a deadline of 0)."""

    low: float
    high: float
    whole: bool = False
    above: bool = False
    unit: str = "seconds"

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.whole and not isinstance(value, int):
            return False
        low_ok = value > self.low if self.above else value >= self.low
        return low_ok and value <= self.high  # nan and inf fail one or the other

    def __str__(self) -> str:
        if self.whole:
            return f"a whole number from {self.low:,.0f} to {self.high:,.0f}"
        if self.above:
            return f"{self.unit} over {self.low:g} and at most {self.high:g}"
        return f"{self.unit} from {self.low:g} to {self.high:g}"


def count(high: int, low: int = 1) -> Range:
    """A count from `low` to `high`."""
    return Range(low, high, whole=True)


def seconds(high: float, *, above: bool = False) -> Range:
    """A duration up to `high`; `above`: 0 itself is refused."""
    return Range(0, high, above=above)


def read_number(setting: str, raw: str, allowed: Range) -> int | float:
    """`raw` (a variable's or a flag's text) as a number in `allowed`, else a
    `ConfigurationError` naming `setting` and the range."""
    text = raw.strip()
    try:
        value: int | float = int(text) if allowed.whole else float(text)
    except ValueError:
        value = math.nan
    if value not in allowed:
        raise ConfigurationError(f"{setting} must be {allowed}, not {raw!r}")
    return value


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
