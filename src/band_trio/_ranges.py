"""Numbers read from outside the code, and the range each must fall in.

Every number band-trio reads from outside — an environment variable
(`BAND_OPENAI_READ_TIMEOUT=120`), a flag's variable, a bridge's config file —
has a `Range`: finite, and bounded above, so that no setting can turn a
deadline or a cap off by being huge (`1e23` attempts, `inf` seconds, 2**63 - 1
bytes). A value outside it is one `ConfigurationError` naming the setting and
the range.

Why a top-level private module: five packages read such numbers (the contract's
`upstream_from_env`, the reference adapters, the bridge's config, the CLI's
flags, the runs API's settings), and none of them owns the rule; it sits beside
`errors` and `policy`, below every package, band-trio's own and no one's API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import ConfigurationError

__all__ = ["DAY", "GIB", "HOUR", "Range", "count", "read_number", "seconds"]

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
