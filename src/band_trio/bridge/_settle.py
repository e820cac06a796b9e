"""The bridge's side of a message's lifecycle on the platform, and the room's retry.

A target that knows nothing of Band (an HTTP endpoint, a command, an A2A agent)
never marks what it was forwarded, and `GET /next` returns the agent's oldest
message that is not `processed`: left `delivered`, the first forwarded message
would come back from every catch-up and hide every message behind it. So with
`settle = "bridge"` (the default) the bridge does what an agent does around its
turn (docs/reference/runtime.md, "The message lifecycle"):

    claim       POST /processing, before the forward, in the forward's cancel scope
    settle      POST /processed once the target took it (shielded, cleanup grace)
    give up     POST /failed after `forward_attempts` consecutive failed forwards
    stop        nothing: the claim stays `processing`, and play replays it
    interrupt   POST /processed: the message is consumed (`consume`)

With `settle = "target"` the target does all of it itself (`band-trio host`),
consuming an interrupted message included: the bridge tells it (`consume`).

`Retry` is a room's backoff after a failure: when its next catch-up is due, and
how often in a row the same message failed. The room's loop waits for its wake
event with that deadline: no task of its own, nothing on the receive path.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable

import trio

from .. import errors
from ..runtime._parts import inbound
from ..wire import ChatMessage
from ._envelope import INTERRUPTED, envelope_for
from ._policy import BridgePolicy
from ._shared import Shared

__all__ = ["Claim", "Retry", "claim", "consume", "done_here", "gave_up", "mark_processed"]

log = logging.getLogger("band_trio.bridge.room")

_NO_LIVE_ATTEMPT = 422
"""`/processed` without a live attempt (docs/reference/platform.md): someone settled it."""


class Claim(enum.Enum):
    CLAIMED = "claimed"
    CONSUMED = "consumed"
    """`processed` on the platform already: nothing left to forward."""
    STOPPED = "stopped"
    """204: the platform holds the room stopped; play's catch-up comes back to it."""
    FAILED = "failed"


class Retry:
    """A room's backoff: `retry_first`, doubling per consecutive failure up to
    `retry_max`; a success resets it, interrupt and stop clear what is pending."""

    __slots__ = ("_attempts", "_head", "_policy", "due", "failures")

    def __init__(self, policy: BridgePolicy) -> None:
        self._policy = policy
        self.failures = 0
        self.due = math.inf
        """`trio.current_time()` at which the retry's catch-up is due (inf: none)."""
        self._head: str | None = None
        self._attempts = 0

    @property
    def pending(self) -> bool:
        return self.due != math.inf

    @property
    def delay(self) -> float:
        """How long after the next failure its catch-up would be due."""
        policy = self._policy
        return min(policy.retry_first * 2.0 ** min(self.failures, 64), policy.retry_max)

    def failed(self) -> float:
        """A forward (or a `/next`) failed: a catch-up is due after the backoff."""
        delay = self.delay
        self.due = min(self.due, trio.current_time() + delay)
        self.failures += 1
        return delay

    def succeeded(self) -> None:
        """The room moved on: the next failure waits `retry_first` again."""
        self.failures = 0

    def clear(self) -> None:
        self.due = math.inf

    def take_due(self) -> bool:
        """True once, when the pending retry's time has come."""
        if self.due <= trio.current_time():
            self.due = math.inf
            return True
        return False

    def charge(self, message_id: str) -> int:
        """One more failed forward of `message_id`: how many in a row it has now."""
        if message_id != self._head:
            self._head, self._attempts = message_id, 0
        self._attempts += 1
        return self._attempts

    def forget(self, message_id: str) -> None:
        if message_id == self._head:
            self._head, self._attempts = None, 0


async def claim(shared: Shared, room_id: str, message_id: str) -> Claim:
    """`POST /processing`, as the runtime's turn claims (idempotent while an attempt is
    live, so a replay after a stop keeps its attempt)."""
    try:
        claimed = await shared.rest.claim(room_id, message_id)
    except errors.ConflictError as exc:
        if exc.code == "already_processed":  # only a platform stricter than its docs
            return Claim.CONSUMED
        log.warning("room %s: claim of %s refused: %s", room_id, message_id, exc)
        return Claim.FAILED
    except errors.PlatformError as exc:
        log.warning("room %s: claim of %s failed: %s", room_id, message_id, exc)
        return Claim.FAILED
    if claimed is None:
        log.info("room %s: claim of %s refused as stopped; left for play", room_id, message_id)
        return Claim.STOPPED
    return Claim.CLAIMED


async def mark_processed(shared: Shared, room_id: str, message_id: str) -> None:
    """The target took it: `processed`. Shielded — the target has done its part, and a
    stop landing now must not leave the message to be forwarded again — and bounded
    as the runtime settles: by `mark_wait` while it waits for a REST connection, then
    by the cleanup grace from the moment it has one. A mark that does not land leaves
    it `processing`: remembered as forwarded here, forwarded again after a restart."""
    policy = shared.policy
    with shared.cutoff.queued(policy.cleanup_grace, wait=policy.mark_wait) as grace:
        try:
            marked = await shared.rest.mark_processed(room_id, message_id, on_slot=grace.start)
        except errors.PlatformResponseError as exc:
            if exc.status == _NO_LIVE_ATTEMPT:
                _settled_by_target(shared, room_id, message_id)
            else:
                log.warning("room %s: processed mark of %s refused: %s", room_id, message_id, exc)
            return
        except errors.PlatformError as exc:
            log.warning("room %s: processed mark of %s failed: %s", room_id, message_id, exc)
            return
        if marked is None:
            log.info("room %s: processed mark of %s refused as stopped", room_id, message_id)
    if grace.scope.cancelled_caught:
        log.warning(
            "room %s: processed mark of %s not answered within %gs",
            room_id,
            message_id,
            shared.policy.cleanup_grace,
        )


def _settled_by_target(shared: Shared, room_id: str, message_id: str) -> None:
    """The bridge claimed it, yet no attempt is live: the target settled it itself
    (a host left at `settle = "bridge"`). Harmless — it was processed once — but
    every forward pays for a claim and a mark that are not needed: say so, once."""
    if shared.settle_hinted:
        return
    shared.settle_hinted = True
    log.info(
        'identity %s: room %s: %s was settled by the target itself; set settle = "target" '
        "for this target (the bridge then neither claims nor marks its messages)",
        shared.agent_id,
        room_id,
        message_id,
    )


async def gave_up(shared: Shared, retry: Retry, room_id: str, message_id: str) -> bool:
    """One more failed forward of `message_id`; True once the bridge gave it up: after
    `forward_attempts` in a row, when it settles, it marks the message `failed` (the
    wire's failed mark with a short label, as the runtime marks a failed turn) and
    posts an error event to the room, shielded, each bounded by the cleanup grace from
    the moment it has a REST connection (as `mark_processed`), and the room moves
    on. `/next` still returns a failed message: catch-ups walk past it (`done_here`)."""
    attempts = retry.charge(message_id)
    if not shared.settles or attempts < shared.bridge_policy.forward_attempts:
        return False
    label = f"the bridge's target did not take it in {attempts} forwards"
    log.warning("room %s: %s: %s; marking it failed", room_id, message_id, label)
    policy = shared.policy
    with shared.cutoff.queued(policy.cleanup_grace, wait=policy.mark_wait) as grace:
        try:
            await shared.rest.mark_failed(room_id, message_id, label, on_slot=grace.start)
        except errors.PlatformError as exc:
            log.warning("room %s: failed mark of %s did not land: %s", room_id, message_id, exc)
        grace.requeue()  # the error event: a grace of its own, from its connection
        try:  # the room is told, as the runtime tells it of a failed turn (best effort)
            await shared.rest.post_event(
                room_id,
                f"Not forwarded: {label}; see the bridge's log.",
                "error",
                {"failure": {"provider": "band-trio bridge", "code": None, "message": label,
                             "detail": None}},
                on_slot=grace.start,
            )  # fmt: skip
        except errors.PlatformError as exc:
            log.info("room %s: error event for %s not posted: %s", room_id, message_id, exc)
    shared.given_up.add(message_id)
    retry.forget(message_id)
    retry.succeeded()  # moved on: the next message's first failure waits retry_first
    return True


def done_here(shared: Shared, wire: ChatMessage) -> bool:
    """Nothing left for the bridge to do with `wire`: our own, taken by the target
    already, or given up — in this process, or by an earlier one: the platform shows it
    `failed` for the identity, which a bridge marks only once its `forward_attempts`
    are spent (the budget is the platform's, as a turn's is). `/next` may still return
    it (a target that settles nothing, a mark that did not land, a `failed` mark)."""
    return (
        wire.sender_id == shared.agent_id
        or wire.id in shared.forwarded
        or wire.id in shared.given_up
        or inbound(wire.chat_room_id or "", shared.agent_id, wire).failed_attempts > 0
    )


async def consume(shared: Shared, room_id: str, message_id: str, claimed: bool) -> None:
    """An interrupt consumes the message it cut off: `processed`, as an
    agent would mark it, shielded and bounded by the cleanup grace (a mark's from the
    moment it has a REST connection, as `mark_processed`), in the room's task
    (never on the receive path). The mark needs a live attempt: the bridge's claim,
    or the target's own. It never claims again: a claim is never cut off (`Forward`),
    and one made now could land after the mark and re-open the message.

    A target that claims itself (`settle = "target"`: a `band-trio host`) is told
    instead and consumes it after its own claim: cutting its forward off does not
    stop a claim it already sent, so a mark from here could land first and that
    claim re-open the message. Told but not consumed (the host unreachable, its
    mark refused), the message is left `processing`, as a stop leaves it."""
    if shared.settles and not claimed:
        log.info("room %s: interrupted %s was never claimed: nothing to consume", room_id,
                 message_id)  # fmt: skip
        return
    policy = shared.policy
    with shared.cutoff.queued(policy.cleanup_grace, wait=policy.mark_wait) as grace:
        told: bool | None = None
        if not shared.settles:
            grace.start()  # the target is told first, over no REST connection
            notice = envelope_for(INTERRUPTED, shared.agent_id, room_id, {"id": message_id})
            told = await shared.target.interrupted(notice)
        if told is None:
            told = await _mark_interrupted(shared, room_id, message_id, grace.start)
        elif not told:
            log.info("room %s: interrupted %s left to the target", room_id, message_id)
        if told:
            shared.forwarded.add(message_id)  # done with: never forwarded again
            log.info("room %s: interrupted %s consumed", room_id, message_id)
    if grace.scope.cancelled_caught:
        log.info("room %s: interrupted %s not consumed within %gs", room_id, message_id,
                 shared.policy.cleanup_grace)  # fmt: skip


async def _mark_interrupted(
    shared: Shared, room_id: str, message_id: str, on_slot: Callable[[], None]
) -> bool:
    try:
        marked = await shared.rest.mark_processed(room_id, message_id, on_slot=on_slot)
    except errors.PlatformError as exc:
        log.info("room %s: interrupted %s not consumed: %s", room_id, message_id, exc)
        return False
    return marked is not None
