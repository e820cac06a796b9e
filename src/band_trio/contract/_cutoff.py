"""`Cutoff`: the latest moment any shielded wait under one owner may last to.

A shielded scope cannot be reached by its owner's cancel: that is its point (a
mark that must land, a start that must not be orphaned). So each one has a
deadline of its own from the policy — and one more bound, shared: the owner's
cutoff. A room host hands its `Cutoff` down to every turn it runs; the turn's
remote starts and stops, its marks and the room's leave are all shielded
through it. A hard stop lowers it once (`cut`), and every such wait, open now or
opened later, ends by then.

    cutoff = Cutoff()
    with cutoff.shield(policy.cleanup_grace):      # shielded, and bounded twice
        await rest.mark_processed(...)
    ...
    cutoff.cut(trio.current_time() + policy.hard_stop_grace)   # the second signal

A mark's grace is for the mark, not for its place in a queue: after a mass
abort a thousand marks wait for the REST client's few connections, and a grace
counted from the queue cut off every mark the platform had not reached within
it (docs/benchmarks.md, the scale rows). `queued` is the shielded scope for
such a wait: bounded first by `wait` (the queue), its grace counting from
`Grace.start`, which the request calls once it has a connection:

    with cutoff.queued(policy.cleanup_grace, wait=policy.mark_wait) as grace:
        await rest.mark_processed(..., on_slot=grace.start)

Nothing waits here: `cut` only lowers deadlines.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import trio

__all__ = ["Cutoff", "Grace"]


class Cutoff:
    """A shared deadline for shielded waits; `at` is `inf` until a hard stop cuts it."""

    __slots__ = ("_scopes", "at")

    def __init__(self) -> None:
        self.at = math.inf
        """The trio clock time every shielded wait under this cutoff ends by."""
        self._scopes: set[trio.CancelScope] = set()

    @property
    def cut_off(self) -> bool:
        """Whether a hard stop lowered it."""
        return self.at != math.inf

    @contextmanager
    def shielded(self, deadline: float) -> Iterator[trio.CancelScope]:
        """A shielded scope that ends at `deadline`, or at the cutoff if that is sooner
        (also when the cutoff is lowered while it is open)."""
        scope = trio.CancelScope(shield=True, deadline=min(deadline, self.at))
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    def shield(self, grace: float) -> AbstractContextManager[trio.CancelScope]:
        """`shielded(now + grace)`: the usual bounded, shielded cleanup."""
        return self.shielded(trio.current_time() + grace)

    @contextmanager
    def queued(self, grace: float, *, wait: float) -> Iterator[Grace]:
        """A shielded scope bounded by `wait` until `Grace.start`, then by `grace` from
        that moment (and by the cutoff all along): a wait in a queue costs the work
        none of its grace, and is bounded all the same."""
        with self.shield(wait) as scope:
            yield Grace(self, scope, grace, wait)

    def cut(self, at: float) -> None:
        """Every shielded wait under this cutoff ends by `at`, open ones included."""
        self.at = min(self.at, at)
        for scope in self._scopes:
            scope.deadline = min(scope.deadline, self.at)


class Grace:
    """The handle of `Cutoff.queued`: `start()` once the work has what it queued for."""

    __slots__ = ("_cutoff", "_grace", "_wait", "scope", "started")

    def __init__(self, cutoff: Cutoff, scope: trio.CancelScope, grace: float, wait: float) -> None:
        self._cutoff = cutoff
        self.scope = scope
        """The shielded scope (`cancelled_caught`: a bound ended the work)."""
        self._grace = grace
        self._wait = wait
        self.started = False

    def start(self) -> None:
        """The grace runs from now: the scope ends `grace` from now, or at the cutoff if
        that is sooner. Only the first call counts (a retry's next slot does not renew
        it), and a scope that has already ended is not revived."""
        if self.started:
            return
        self.started = True
        if not self.scope.cancel_called:
            self.scope.deadline = min(trio.current_time() + self._grace, self._cutoff.at)

    def requeue(self) -> None:
        """The next step of the same work queues again (a settling's `working: false`
        and error event, once its mark is answered): bounded by `wait` from now, its
        grace to start at its own `start()`. A scope that has ended stays ended."""
        if self.scope.cancel_called:
            return
        self.started = False
        self.scope.deadline = min(trio.current_time() + self._wait, self._cutoff.at)
