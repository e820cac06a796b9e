"""When a call to an upstream is asked again, and how long it waits first (sans-IO).

In the lowest layer, beside `policy` and `errors`: it imports nothing of
band-trio's and no I/O library (import-linter holds both), so the platform's
REST client (`link`) and the adapters' contract (`contract`) share it.

One home for the rules every HTTP client of band-trio follows — the REST
client of the platform (`link`) and every client of an upstream through
`band_trio.contract.call_upstream` (the reference adapters, the bridge's
targets, an adapter author's own code):

* what a failed attempt was (`Fault`: an error status, no connection, a
  connection dropped or silent, a stream that ended before its finish marker,
  something unreadable) and whether it is transient (`Fault.transient`);
* how long the upstream asked us to wait (`retry_after`: `retry-after-ms`,
  `Retry-After` in seconds or as an HTTP date);
* how long to wait otherwise (`full_jitter`: exponential backoff, full jitter);
* and the decision itself (`Retries.after`): wait and try again, or give up
  with the reason in words a user can read ("the model provider answered 429
  three times; last Retry-After 1 s").

No clock is read here except a wall clock for an HTTP-date `Retry-After`
(injectable): the caller passes `now` and the deadline, and sleeps.
"""

from __future__ import annotations

import email.utils
import enum
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = [
    "PLATFORM_RETRY_STATUSES",
    "RETRY_STATUSES",
    "Fault",
    "FaultKind",
    "GiveUp",
    "Retries",
    "Retry",
    "equal_jitter",
    "full_jitter",
    "retry_after",
    "retry_after_seconds",
]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""Answers of an upstream that are worth asking again: a request timeout, a lock
conflict, a rate limit, a server error, an overload (OpenAI's and Anthropic's SDKs
retry the same). Every other status — 400, 401, 403, 404, 422, … — is the answer."""
PLATFORM_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""The platform's: there 409 is an answer (`connection_conflict`, `already_processed`)."""


class FaultKind(enum.Enum):
    """What went wrong with one attempt."""

    STATUS = "status"
    """The upstream answered an error status."""
    UNSENT = "unsent"
    """No connection could be made: the request never left."""
    DROPPED = "dropped"
    """The connection broke before the answer was complete."""
    STALLED = "stalled"
    """The answer (or the stream) was silent for longer than the read timeout."""
    TRUNCATED = "truncated"
    """The stream ended cleanly, but before its finish marker (`[DONE]`, a
    `finish_reason`, a terminal state): the answer is not whole."""
    MALFORMED = "malformed"
    """The upstream sent something that is not its protocol: never asked again."""


_TRANSIENT_KINDS = frozenset(
    {FaultKind.UNSENT, FaultKind.DROPPED, FaultKind.STALLED, FaultKind.TRUNCATED}
)


@dataclass(frozen=True, slots=True)
class Fault:
    """One failed attempt, as the retry rules see it."""

    kind: FaultKind
    status: int | None = None
    """The error status (`FaultKind.STATUS`)."""
    retry_after: float | None = None
    """Seconds the upstream asked to wait (`Retry-After`, `retry-after-ms`), if it did."""
    detail: str = ""
    """What the upstream said, or what broke, in a few words."""

    def transient(self, statuses: frozenset[int] = RETRY_STATUSES) -> bool:
        """Whether asking again may succeed (the status in `statuses`, or a broken,
        silent or truncated exchange)."""
        if self.kind is FaultKind.STATUS:
            return self.status in statuses
        return self.kind in _TRANSIENT_KINDS

    def words(self) -> str:
        """The fault as the end of a sentence whose subject is the upstream."""
        if self.kind is FaultKind.STATUS:
            return f"answered {self.status}"
        return _WORDS[self.kind]


_WORDS = {
    FaultKind.UNSENT: "could not be reached",
    FaultKind.DROPPED: "dropped the connection before the answer was complete",
    FaultKind.STALLED: "went silent past the read timeout",
    FaultKind.TRUNCATED: "ended its answer before it was finished",
    FaultKind.MALFORMED: "sent something unreadable",
}


@dataclass(frozen=True, slots=True)
class Retry:
    """Ask again after `delay` seconds."""

    delay: float


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Do not ask again; `reason` says why, in words (the subject is the upstream)."""

    reason: str


def full_jitter(
    attempt: int, base: float, cap: float, rand: Callable[[], float] = random.random
) -> float:
    """The wait before retry number `attempt + 1`: uniform in [0, min(cap, base * 2**attempt)).

    Full jitter (every client draws anywhere in the window) spreads a crowd of clients
    that failed together better than a fixed doubling does."""
    ceiling = min(cap, base * 2.0 ** min(attempt, 64))
    return rand() * ceiling


def equal_jitter(
    attempt: int, base: float, cap: float, rand: Callable[[], float] = random.random
) -> float:
    """The wait before retry number `attempt + 1`: uniform in [w/2, w), where
    w = min(cap, base * 2**attempt).

    Half of each step is kept, so the retries of one call always span at least half
    the doubling schedule: a client that must ride out a short outage of its peer
    (the platform restarting) cannot spend its whole budget in the first instant,
    as full jitter can."""
    ceiling = min(cap, base * 2.0 ** min(attempt, 64))
    return ceiling / 2 + rand() * ceiling / 2


def retry_after_seconds(value: str | None, *, wall_now: float | None = None) -> float | None:
    """Seconds from a `Retry-After` value: delta-seconds, or an HTTP date (RFC 9110).

    None if it is absent or unreadable; a date in the past is 0. Fractions are
    accepted (`0.5`), as the embedded platform sends them."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        now = time.time() if wall_now is None else wall_now
        return max(0.0, when.timestamp() - now)
    if math.isnan(seconds) or seconds < 0:
        return None
    return seconds


def retry_after(headers: Mapping[str, str], *, wall_now: float | None = None) -> float | None:
    """How long an answer's headers ask to wait: `retry-after-ms` (OpenAI's and
    Azure's, in milliseconds) first, else `Retry-After`. Header names are looked up
    in lower case (httpx's `Headers` matches any case)."""
    millis = retry_after_seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    return retry_after_seconds(headers.get("retry-after"), wall_now=wall_now)


class Retries:
    """The retry ledger of one call: feed it each failed attempt, it says what next.

    ::

        retries = Retries(attempts=3, base=0.5, cap=8, retry_after_cap=60, peer="the model")
        decision = retries.after(fault, now=clock(), deadline=turn_deadline)
        if isinstance(decision, GiveUp):
            raise SomeError(decision.reason)
        sleep(decision.delay)
    """

    def __init__(
        self,
        *,
        attempts: int,
        base: float,
        cap: float,
        retry_after_cap: float,
        peer: str = "the upstream",
        statuses: frozenset[int] = RETRY_STATUSES,
        rand: Callable[[], float] | None = None,
        backoff: Callable[[int, float, float, Callable[[], float]], float] = full_jitter,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self.attempts = attempts
        self.base = base
        self.cap = cap
        self.retry_after_cap = retry_after_cap
        self.peer = peer
        self.statuses = statuses
        self._rand = rand or random.random
        self._backoff = backoff
        """`full_jitter` (the default: spreads a crowd of clients best) or `equal_jitter`."""
        self.faults: list[Fault] = []
        """Every failed attempt so far, in order."""

    def after(
        self,
        fault: Fault,
        *,
        now: float = 0.0,
        deadline: float = math.inf,
        may_retry: bool = True,
        why_not: str = "",
    ) -> Retry | GiveUp:
        """The decision after the attempt that failed with `fault`.

        `deadline` (same clock as `now`): a wait that would end at or past it gives up
        now, saying so, rather than sleeping into the cancel. `may_retry` False (part of
        the answer was posted, the turn was aborted, the work already started
        elsewhere) gives up with `why_not` appended."""
        self.faults.append(fault)
        tries = len(self.faults)
        said = f"{self.peer} {fault.words()}"
        if not fault.transient(self.statuses):
            detail = f": {fault.detail}" if fault.detail else ""
            return GiveUp(said + detail)
        if not may_retry:
            return GiveUp(said + (f" {why_not}" if why_not else ""))
        if tries >= self.attempts:
            return GiveUp(self._summary())
        if fault.retry_after is not None:
            if fault.retry_after > self.retry_after_cap:
                return GiveUp(
                    f"{said} with Retry-After {fault.retry_after:g} s, longer than the"
                    f" {self.retry_after_cap:g} s this agent waits"
                )
            delay = fault.retry_after
        else:
            delay = self._backoff(tries - 1, self.base, self.cap, self._rand)
        if now + delay >= deadline:
            return GiveUp(
                f"{said}; a retry in {delay:.3g} s would end past the deadline"
                f" ({max(0.0, deadline - now):.3g} s left)"
            )
        return Retry(delay)

    def _summary(self) -> str:
        """Why the last attempt was the last one: every fault, and the last Retry-After."""
        words = [fault.words() for fault in self.faults]
        if len(set(words)) == 1:
            text = f"{self.peer} {words[0]} {_times(len(words))}"
        else:
            text = f"{self.peer} failed {len(words)} attempts: " + ", ".join(words)
        last = self.faults[-1]
        if last.retry_after is not None:
            text += f"; last Retry-After {last.retry_after:g} s"
        elif last.detail and last.kind is not FaultKind.STATUS:
            text += f" ({last.detail})"
        return text


def _times(count: int) -> str:
    return {1: "once", 2: "twice", 3: "three times"}.get(count, f"{count} times")
