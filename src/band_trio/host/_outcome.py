"""What the host answers a forward with (`HostOutcome`).

Each answer says what really happened (`HostOutcome`): a turn that did not run,
or whose mark did not land, is never reported done. The statuses follow what
the bridge's target retries within a forward (`band_trio.retry`: 408, 409,
429, 5xx): 502 and 503 where asking again may help, a 4xx where it cannot.
"""

from __future__ import annotations

import enum

from ..runtime.parts import Outcome

__all__ = ["SETTLED", "HostOutcome"]


class HostOutcome(enum.Enum):
    """What the host answers a forward with; `status` is the HTTP status."""

    PROCESSED = ("processed", 200)
    """The adapter ran and its message is marked `processed`."""
    SETTLED = ("settled", 200)
    """An earlier run's outstanding mark was sent again and landed."""
    COMPLETED = ("completed", 200)
    """This host completed the message before: nothing is run twice."""
    EXHAUSTED = ("exhausted", 200)
    """This host spent the message's attempts (it failed before): it runs no more."""
    CONSUMED = ("consumed", 200)
    """The platform has it `processed` already (an interrupt consumed it)."""
    SKIPPED = ("skipped", 200)
    """The agent's own message."""
    IGNORED = ("ignored", 200)
    """Not a message: nothing to run."""
    FAILED = ("failed", 422)
    """The adapter raised (or ran past its deadline): the message is marked `failed`.
    A status the bridge's target does not retry within the forward: asking again
    would run nothing (the next forward is answered `exhausted`)."""
    UNSETTLED = ("unsettled", 503)
    """The adapter finished but its mark did not land: the next attempt sends it."""
    NOT_CLAIMED = ("not_claimed", 502)
    """The platform refused or failed the claim (or the read): nothing ran; worth
    asking again (the bridge's target retries 502 within the forward)."""
    STOPPED = ("stopped", 423)
    """The room is stopped on the platform (its claim answered 204): nothing ran; a
    play replays it (423 Locked: not retried until then)."""
    UNKNOWN = ("unknown", 404)
    """The platform holds no such message, unprocessed, for this agent in that room."""
    MISMATCH = ("mismatch", 422)
    """The platform's copy of the message differs from the envelope's: nothing ran."""

    @property
    def label(self) -> str:
        return self.value[0]

    @property
    def status(self) -> int:
        return int(self.value[1])


SETTLED = {
    Outcome.SUCCEEDED: HostOutcome.PROCESSED,
    Outcome.FAILED: HostOutcome.FAILED,
    Outcome.NOT_CLAIMED: HostOutcome.NOT_CLAIMED,
    Outcome.CLAIM_STOPPED: HostOutcome.STOPPED,
    Outcome.CONSUMED: HostOutcome.CONSUMED,
}
