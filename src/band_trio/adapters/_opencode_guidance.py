"""Guidance passed on to a running OpenCode prompt, as OpenCode itself takes input mid-run.

OpenCode accepts a prompt while its session works: `POST /session/{id}/prompt_async`
answers `204` at once, the new user message is stored, and the run's loop — which
reads the session's messages again before each model call — sees it at its next step:
the next request to the model holds it after the step's tool results, and the run goes
on to answer it, ending idle once (observed with 1.18.33 and stubllm: a prompt sent
while a `bash` call waited for its permission reached the model right after that
call's result). A prompt that comes as the run ends starts a run of its own, which
the turn waits for as well (`Answer`, `guided`).

So the turn passes guidance on as soon as it takes it, once the run is under way (its
prompt is stored first, so the guidance's user message is newer), one prompt per
batch, each message a text part naming its sender (`_guidance.guidance_text`). A
prompt that OpenCode refuses fails the turn: the guidance was taken, and shares the
turn's fate. After an abort OpenCode keeps the guidance in its history, unanswered,
as it keeps the aborted run's own prompt.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager

import trio

from ..contract import Message, Turn
from ._guidance import guidance_text
from ._opencode_events import Answer

__all__ = ["forwarding", "guidance_parts"]

Send = Callable[[list[dict[str, str]]], Awaitable[None]]


def guidance_parts(messages: tuple[Message, ...]) -> list[dict[str, str]]:
    """A prompt's parts for a batch of guidance."""
    return [{"type": "text", "text": guidance_text(m)} for m in messages]


@asynccontextmanager
async def forwarding(
    turn: Turn, answer: Answer, running: trio.Event, send: Send
) -> AsyncIterator[None]:
    """Within the block, guidance the turn is offered is taken and `send` on, once
    `running` is set; the block's end stops it. Outside a STEER room nothing is offered."""
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_forward, turn, answer, running, send)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The body's error or a refused prompt, with the other task's Cancelled; or only
        # Cancelled (the turn's abort reached both): raised as itself, not as a group.
        leaves = list(_leaves(group))
        errors = [exc for exc in leaves if not isinstance(exc, trio.Cancelled)]
        if len(errors) <= 1:
            raise (errors or leaves)[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


async def _forward(turn: Turn, answer: Answer, running: trio.Event, send: Send) -> None:
    await running.wait()
    while True:
        taken = await turn.next_guidance()
        answer.guided += 1  # before any checkpoint: the run is not over until it is answered
        await send(guidance_parts(taken))
