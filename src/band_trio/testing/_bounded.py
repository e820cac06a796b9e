"""Each probe in a trio run of its own, in a thread the kit can walk away from.

An adapter that never lets the cancel in — a shielded wait, a blocking call in
`trio.to_thread.run_sync` without `abandon_on_cancel` — keeps its turn, and so
the agent's `run()`, alive for ever: no scope can end it, and a kit that waited
for it in its own run would hang with it (and `band-trio conformance`, and the
author's CI). So every probe runs its whole kit (platform, agent, script) in
`trio.run` on a thread of its own, and the caller waits for it under two
deadlines:

* `Subject.probe_deadline` for the whole probe;
* once the probe's script has its verdict, `Subject.deadline` for the kit to
  stop the agent and close.

Past either, the probe is a failed row saying what it was waiting for, and its
run is abandoned: the thread (a daemon) and what the stuck adapter holds stay
until the process exits. Nothing else of the kit is touched by it: each probe
has a platform, an agent and a thread of its own.

A subject that is not `isolated` (its adapters share something of the caller's
run) runs its probes in the caller's run instead (`run_here`): still under
`Subject.probe_deadline`, but only an adapter that lets the cancel in can be
bounded there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import trio

from ._kit import ProbeResult, Subject
from ._progress import Progress, enter

__all__ = ["run_bounded", "run_here"]


async def run_bounded(
    name: str, probe: Callable[[Subject], Awaitable[ProbeResult]], subject: Subject
) -> ProbeResult:
    """`probe(subject)` in a trio run on a thread of its own, under the probe's deadlines
    (see the module). Never raises for what the probe or its adapter did."""
    token = trio.lowlevel.current_trio_token()
    with trio.move_on_after(subject.probe_deadline) as bound:

        def shorten() -> None:
            bound.deadline = min(bound.deadline, trio.current_time() + subject.deadline)

        def on_verdict() -> None:  # in the probe's thread (and its trio run)
            with contextlib.suppress(trio.RunFinishedError):  # the caller's run is gone
                token.run_sync_soon(shorten)

        state = Progress(name, _on_verdict=on_verdict)

        def run_in_thread() -> None:
            enter(state)
            try:
                state.result = trio.run(probe, subject)
            except BaseException as exc:  # the probe's own run broke: a failed row all the same
                state.result = ProbeResult(name, "failed", f"the probe's run broke: {exc!r}")

        # a limiter of its own: a probe abandoned here keeps its token for ever
        await trio.to_thread.run_sync(
            run_in_thread, abandon_on_cancel=True, limiter=trio.CapacityLimiter(1)
        )
    if state.result is not None:
        return state.result
    return ProbeResult(name, "failed", _overdue(state, subject), None)


async def run_here(
    name: str, probe: Callable[[Subject], Awaitable[ProbeResult]], subject: Subject
) -> ProbeResult:
    """`probe(subject)` in the caller's own run, under `Subject.probe_deadline` (for a
    subject that is not `isolated`). Never raises for what the probe or its adapter did."""
    with trio.move_on_after(subject.probe_deadline):
        try:
            return await probe(subject)
        except Exception as exc:  # the probe itself broke: a failed row, as in its own run
            return ProbeResult(name, "failed", f"the probe's run broke: {exc!r}")
    return ProbeResult(
        name,
        "failed",
        f"the probe did not end within {subject.probe_deadline:g}s (run in the caller's "
        "run, as the subject is not isolated)",
    )


def _overdue(state: Progress, subject: Subject) -> str:
    stuck = (
        "its adapter never lets the cancel in (a shielded wait, or a blocking call in a "
        "thread without `abandon_on_cancel`), so its agent cannot be stopped; the probe's "
        "run was left behind"
    )
    if state.verdict is not None:
        verdict = state.verdict
        said = {
            "failed": verdict.observed,
            "not applicable": f"not applicable ({verdict.observed})",
        }.get(verdict.outcome, "its script passed")
        return f"{said}; then the agent did not stop within {subject.deadline:g}s: {stuck}"
    return (
        f"the probe did not end within {subject.probe_deadline:g}s (waiting for "
        f"{state.waiting}): {stuck}"
    )
