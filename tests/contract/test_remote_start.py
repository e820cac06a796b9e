"""A start of remote work cut by its deadline is visible to the code after it.

`RemoteWork.starting()` shields the start call; from the turn's abort on the call
gets `backend_stop_grace`, and the turn's own deadline plus that grace at most.
When that bound cuts it, the block raises `StartCutError`: the code after it
never runs on a handle that never came (issue 21, item 2). The adapters' starts
are checked against a peer that accepts the request and never answers.
"""

from __future__ import annotations

import pytest
import trio

from band_trio.adapters import A2AAdapter
from band_trio.contract import Message, StopOutcome, Turn, TurnControl
from band_trio.errors import StartCutError
from peers import SilentPeer, silent_peer
from support import NoPlatform

DEADLINE = 10
GRACE = 0.3


def a_turn(deadline: float = float("inf")) -> tuple[Turn, TurnControl]:
    message = Message(id="m1", room_id="r1", content="hello", sender_id="u1", sender_type="User")
    control = TurnControl("r1", "m1", stop_grace=GRACE, deadline=deadline)
    return Turn(message, NoPlatform(), control=control), control


async def start_that_never_answers(turn: Turn, after: list[str]) -> None:
    """An adapter's start whose peer never reveals the handle; `after` records the
    code after the start block running (it must not)."""

    async def stop(handle: str) -> None:
        raise AssertionError("no handle: nothing to stop")

    async with turn.remote(stop=stop, name="job") as work:
        with work.starting():
            await trio.sleep_forever()
        after.append("used the missing handle")


async def test_a_start_cut_by_the_abort_raises_and_the_code_after_it_never_runs(
    autojump_clock: object,
) -> None:
    turn, control = a_turn()
    after: list[str] = []
    scope = trio.CancelScope()

    async def abort_soon() -> None:
        await trio.sleep(1)
        control.aborted("interrupt", "test")
        scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_soon)
        with pytest.raises(StartCutError, match=f"within {GRACE:g}s of the turn's abort"), scope:
            await start_that_never_answers(turn, after)
    assert after == []
    assert trio.current_time() == pytest.approx(1 + GRACE)
    [stopped] = turn.remote_stops
    assert stopped.outcome is StopOutcome.UNCONFIRMED
    assert "revealed no handle" in stopped.detail


async def test_a_start_cut_by_the_turns_own_deadline_raises_too(autojump_clock: object) -> None:
    turn, _ = a_turn(deadline=trio.current_time() + 2)
    after: list[str] = []
    with (
        pytest.raises(StartCutError, match="the turn's deadline passed"),
        trio.CancelScope(deadline=turn.deadline),
    ):
        await start_that_never_answers(turn, after)
    assert after == []
    assert trio.current_time() == pytest.approx(2 + GRACE)


async def test_a_start_that_finishes_within_the_grace_raises_nothing(
    autojump_clock: object,
) -> None:
    turn, control = a_turn()
    stops: list[str] = []

    async def stop(handle: str) -> None:
        stops.append(handle)

    with trio.CancelScope() as scope:
        async with turn.remote(stop=stop, name="job") as work:
            control.aborted("interrupt", None)
            scope.cancel()
            with work.starting():
                await trio.sleep(GRACE / 2)
                work.started("h1")
            await trio.sleep_forever()
    assert stops == ["h1"]


async def abort_once_held(peer: SilentPeer, control: TurnControl, scope: trio.CancelScope) -> None:
    await peer.wait_requests(1)
    control.aborted("interrupt", "test")
    scope.cancel()


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "polled"])
async def test_the_a2a_adapters_cut_start_is_a_start_cut_error_not_a_missing_handle(
    streaming: bool,
) -> None:
    """Before: `AttributeError: 'NoneType' object has no attribute 'next'` (streamed) and
    a bare `AssertionError` (polled), after the start was cut as if it had succeeded."""
    turn, control = a_turn()
    scope = trio.CancelScope()
    with trio.fail_after(DEADLINE):
        async with silent_peer() as peer, trio.open_nursery() as nursery:
            adapter = A2AAdapter(peer.url, streaming=streaming)
            nursery.start_soon(abort_once_held, peer, control, scope)
            with pytest.raises(StartCutError, match="the start of a2a task was cut off"), scope:
                await adapter.on_turn(turn)
    [stopped] = turn.remote_stops
    assert stopped.outcome is StopOutcome.UNCONFIRMED
