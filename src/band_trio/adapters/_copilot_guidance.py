"""Guidance passed on to a running Copilot turn, as the CLI itself takes input mid-turn.

The Copilot CLI accepts a message while a session works: `session.send` with `mode:
"immediate"` answers with the new user message's id at once, and the message is
injected into the running turn before its next model call (a `user.message` with
`delivery: "steering"`); one that comes after the turn's last model call is taken up
as queued, with a model call of its own, before the session goes idle (`delivery:
"queued"`). Observed with CLI 1.0.102 and stubllm, in both cases the session went
idle once and the assistant's answer named the turn's prompt as its origin; an
abort drops an injected message not yet taken up (copilot-sdk
docs/features/steering-and-queueing.md, `SendMode` in nodejs/src/generated/rpc.ts).

So in a `WhileBusy.STEER` room the turn passes guidance on as soon as it takes it,
once the CLI has taken up the prompt (its `user.message` seen: the guidance comes
after it), one `session.send` per message, each naming its sender
(`_guidance.guidance_text`); the run is over only once the CLI went idle after the
guidance too (`Run.ended`), and its answer is the reply's.

A CLI that refuses `mode: "immediate"` (an older one: JSON-RPC "invalid params", or
an error naming the mode) gets the message again without a mode — queued, as every
CLI takes a prompt — so that what was taken is still answered in the turn; no more
guidance is taken while that process runs, and the runtime runs what is not taken
as its own turn afterwards.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager

import trio

from ..contract import Message, Turn
from ._copilot_errors import CopilotGone, CopilotRpcError
from ._copilot_session import Run, Session

__all__ = ["IMMEDIATE", "refuses_immediate", "steering"]

IMMEDIATE = "immediate"
"""`session.send`'s mode that injects a message into the running turn."""

INVALID_PARAMS = -32602

_NAMES_MODE = re.compile(r"\b(mode|immediate)\b", re.IGNORECASE)

Guide = Callable[[Message], Awaitable[None]]


def refuses_immediate(exc: CopilotRpcError) -> bool:
    """Whether the CLI's error to a `session.send` with `mode: "immediate"` refuses the
    mode: "invalid params" (the prompt, the same call without the mode, was accepted
    moments before in the same session), or an error that names the mode."""
    return exc.code == INVALID_PARAMS or bool(_NAMES_MODE.search(str(exc)))


@asynccontextmanager
async def steering(
    turn: Turn, session: Session, run: Run, guide: Guide, steers: Callable[[], bool]
) -> AsyncIterator[None]:
    """Within the block, guidance offered to `turn` is taken and passed on with `guide`
    (while `steers()`); the block's end stops it, in the turn's task: no task outlives
    it, and an interrupt ends it at once. Outside a STEER room nothing is offered."""
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_forward, turn, session, run, guide, steers)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The body's error or a refused send, with the other task's Cancelled; or only
        # Cancelled (the turn's abort reached both): raised as itself, not as a group.
        leaves = list(_leaves(group))
        errors = [exc for exc in leaves if not isinstance(exc, trio.Cancelled)]
        if len(errors) <= 1:
            raise (errors or leaves)[0] from None
        raise


async def _forward(
    turn: Turn, session: Session, run: Run, guide: Guide, steers: Callable[[], bool]
) -> None:
    try:
        await session.wait(lambda: run.started or run.done)
    except CopilotGone:
        return  # the turn's own wait says so
    while steers() and run.takes_guidance:
        await turn.wait_guidance()
        if run.done or not steers():
            return  # over for the CLI (or refused meanwhile): left to run afterwards
        taken = turn.take_guidance()
        run.sending += len(taken)  # before any checkpoint: the run is not over until sent
        session.notify()
        try:
            for message in taken:
                await guide(message)
        except CopilotGone:
            return  # the turn's own wait says so


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc
