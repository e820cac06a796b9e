"""One retry helper for every client of an upstream: `call_upstream`.

A model provider rate-limits, an agent answers 503 while it restarts, a
stream drops or stalls half-way. The reference adapters, the bridge's targets
and an adapter author's own code all meet that the same way, through one
helper, so the rules live in one place (`band_trio.retry.Retries`, shared with
the platform's REST client):

    async def attempt() -> str:
        async with stream_request(turn, client, "POST", url, json=body) as response:
            await check_status(response, turn.upstream)   # 429, 503… → UpstreamFault
            return await read_answer(response)           # raise UpstreamFault.truncated()
                                                         # for an answer cut short
    text = await call_upstream(turn, attempt, peer="the model provider")

* An attempt fails by raising `UpstreamFault` (or an httpx2 error, judged
  here: no connection, a connection dropped, a read timeout). Anything else it
  raises — and `trio.Cancelled` — goes straight through, never retried.
* It is asked again only if the fault is transient (`retry.RETRY_STATUSES`, a
  broken, silent or truncated exchange), fewer than `UpstreamPolicy.attempts`
  were made, the turn posted nothing to the room during it (a retry never
  duplicates a partial answer; what earlier attempts or rounds posted is not
  posted again, since it is not part of the attempt), the turn was not
  interrupted or stopped, and `may_retry()` (if given) says yes.
* The wait is the upstream's `Retry-After` / `retry-after-ms` (up to
  `retry_after_cap`; longer fails at once, saying so), else exponential backoff
  with full jitter. It is a plain `trio.sleep` in the caller's scope: an
  interrupt or stop cancels it at once. A wait that would end past the
  deadline in force (the turn's) gives up instead.
* Giving up raises `error(reason)` — the adapter's own error class, an
  `UpstreamError` by default — whose message says why in words the room's users
  read in the turn's error event.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx2
import trio

from ..errors import UpstreamError
from ..policy import UpstreamPolicy
from ..retry import Fault, FaultKind, GiveUp, Retries, retry_after
from ._turn import Turn

__all__ = ["UpstreamFault", "call_upstream", "fault_of"]

log = logging.getLogger("band_trio.upstream")

T = TypeVar("T")


class UpstreamFault(UpstreamError):
    """One attempt's fault, raised inside an attempt given to `call_upstream`, which
    judges it (`fault`) and retries or gives up. Raised anywhere else it is an
    `UpstreamError` like any other."""

    def __init__(self, fault: Fault) -> None:
        detail = f": {fault.detail}" if fault.detail else ""
        super().__init__(f"the upstream {fault.words()}{detail}")
        self.fault = fault

    @classmethod
    def status(
        cls, status: int, *, retry_after: float | None = None, detail: str = ""
    ) -> UpstreamFault:
        """An error status (with the wait the upstream asked for, if it did)."""
        return cls(Fault(FaultKind.STATUS, status=status, retry_after=retry_after, detail=detail))

    @classmethod
    def truncated(cls, detail: str = "") -> UpstreamFault:
        """The stream ended before its finish marker: the answer is not whole."""
        return cls(Fault(FaultKind.TRUNCATED, detail=detail))

    @classmethod
    def dropped(cls, detail: str = "") -> UpstreamFault:
        """The exchange broke before the answer was complete."""
        return cls(Fault(FaultKind.DROPPED, detail=detail))


_UNSENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
_STALLED = (httpx2.ReadTimeout, httpx2.WriteTimeout)
_DROPPED = (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError, httpx2.CloseError)


def fault_of(error: httpx2.HTTPError) -> Fault:
    """What an httpx2 error means for the retry rules."""
    detail = str(error) or type(error).__name__
    if isinstance(error, _UNSENT):
        return Fault(FaultKind.UNSENT, detail=detail)
    if isinstance(error, _STALLED):
        return Fault(FaultKind.STALLED, detail=detail)
    if isinstance(error, _DROPPED):
        return Fault(FaultKind.DROPPED, detail=detail)
    if isinstance(error, httpx2.HTTPStatusError):
        response = error.response
        wait = retry_after(response.headers)
        return Fault(FaultKind.STATUS, status=response.status_code, retry_after=wait)
    return Fault(FaultKind.MALFORMED, detail=f"{type(error).__name__}: {detail}")


async def call_upstream(
    turn: Turn | None,
    attempt: Callable[[], Awaitable[T]],
    *,
    peer: str = "the upstream",
    upstream: UpstreamPolicy | None = None,
    error: Callable[[str], Exception] = UpstreamError,
    may_retry: Callable[[], bool] | None = None,
) -> T:
    """`await attempt()`, asked again under the retry rules (see the module); its result.

    `turn`: the turn the call serves (its `upstream` policy, its posts, its abort);
    None for a call outside a turn's body — a remote stop, which runs shielded under
    its own deadline (`backend_stop_grace`) and is retried only within it.
    `peer` names the upstream in the reason (`"the model provider"`); `upstream`
    replaces the turn's policy (an adapter's own); `error` builds what is raised on
    giving up; `may_retry` is asked before each retry (False: the attempt started
    work elsewhere that a second attempt would duplicate)."""
    policy = upstream or (turn.upstream if turn is not None else UpstreamPolicy())
    retries = Retries(
        attempts=policy.attempts,
        base=policy.retry_base,
        cap=policy.retry_cap,
        retry_after_cap=policy.retry_after_cap,
        peer=peer,
    )
    while True:
        posted = turn.posted if turn is not None else 0
        cause: Exception
        try:
            return await attempt()
        except UpstreamFault as exc:
            fault, cause = exc.fault, exc
        except httpx2.HTTPError as exc:
            fault, cause = fault_of(exc), exc
            if fault.kind is FaultKind.STALLED:
                fault = Fault(FaultKind.STALLED, detail=f"no data for {policy.read_timeout:g} s")
        why_not = ""
        if turn is not None and turn.aborted:
            why_not = "as the turn was being aborted"
        elif turn is not None and turn.posted != posted:
            why_not = "after part of the answer was posted, so it was not asked again"
        elif may_retry is not None and not may_retry():
            why_not = "after its work had started there, so it was not asked again"
        decision = retries.after(
            fault,
            now=trio.current_time(),
            deadline=trio.current_effective_deadline(),
            may_retry=not why_not,
            why_not=why_not,
        )
        if isinstance(decision, GiveUp):
            raise error(decision.reason) from cause
        log.info(
            "%s %s (%s); attempt %d of %d in %.2f s",
            peer,
            fault.words(),
            fault.detail or "-",
            len(retries.faults) + 1,
            policy.attempts,
            decision.delay,
        )
        await trio.sleep(decision.delay)  # in the caller's scope: an abort cancels it
