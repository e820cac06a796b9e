"""The room as the judge of a coding agent's permission requests: the desk where a
JSON-RPC peer's request waits while the turn asks the room (`Turn.ask`).

    desk = PermissionDesk()
    session.desk = desk                          # the reader hands requests to it
    async with trio.open_nursery() as nursery:   # in the turn's task
        nursery.start_soon(desk.serve, turn, None)
        ...                                      # wait for the peer's answer
    desk.cancel_all()                            # after the turn's stop: none left open

Why a desk and not `turn.ask` where the request arrives: the peer's requests come
in the connection's tasks (the Copilot CLI's reader, an ACP request handler), not in
the turn's, and a question belongs to the turn — its wait must end when the turn is
interrupted or stopped. So the request is put on the desk (`submit`, never
blocking), the turn's own task (`serve`) asks the room one request at a time (one
question is open per room anyway), and the request is settled with the choice.

What settles a request: the room's answer (a choice), its deadline (`Turn.ask`
returns the last choice: the refusing one), or `cancel_all` (`None`: the turn was
cancelled, or ended before it was asked — the adapter answers the peer the way its
protocol says for a cancelled turn). A port where nobody can be asked (the runs API
for now) settles it with the refusing choice, and so does every later request.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import trio

from ..contract import Turn
from ..errors import CannotAskError

__all__ = [
    "MAX_DETAIL",
    "PERMISSION_MODES",
    "PermissionDesk",
    "PermissionRequest",
    "asking_while",
    "shorten",
]

log = logging.getLogger("band_trio.adapters")

T = TypeVar("T")

PERMISSION_MODES = ("allow-list", "ask")
"""How a permission request the allow-list does not grant is answered: refused
(`allow-list`, the default), or put to the room (`ask`)."""

MAX_DETAIL = 160
"""Characters of a command, path or URL quoted in a question (its head and tail)."""


def shorten(text: str, limit: int = MAX_DETAIL) -> str:
    """`text` on one line, its middle cut out past `limit` characters (a command's head
    says what it runs, a path's tail which file)."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    head = (limit - 1) * 2 // 3
    return f"{line[:head]}…{line[len(line) - (limit - 1 - head) :]}"


class PermissionRequest:
    """One request of the peer's, waiting for its choice; `respond` (if given) is told
    the outcome once, in the task that settles it (it must not block)."""

    def __init__(
        self,
        question: str,
        choices: Sequence[str],
        respond: Callable[[str | None], None] | None = None,
    ) -> None:
        self.question = question
        self.choices = tuple(choices)
        self.refusal = self.choices[-1]
        """The last choice: what the deadline picks, and what a port that cannot ask gets."""
        self.choice: str | None = None
        """The choice picked; None until settled, and after a cancel."""
        self._respond = respond
        self._settled = trio.Event()

    @property
    def settled(self) -> bool:
        return self._settled.is_set()

    def settle(self, choice: str | None) -> bool:
        """Settle it (once: a later call does nothing and returns False)."""
        if self._settled.is_set():
            return False
        self.choice = choice
        self._settled.set()
        if self._respond is not None:
            self._respond(choice)
        return True

    async def wait(self) -> str | None:
        """The choice, once settled (None: cancelled)."""
        await self._settled.wait()
        return self.choice


class PermissionDesk:
    """The requests of one turn that wait for the room (see the module)."""

    def __init__(self) -> None:
        self._waiting: deque[PermissionRequest] = deque()
        self._open: list[PermissionRequest] = []
        self._changed = trio.Event()
        self.closed = False
        self.asked = 0
        self.cannot_ask: str | None = None
        """Why the turn's port cannot ask (`CannotAskError`), once it said so."""

    def submit(self, request: PermissionRequest) -> None:
        """Put a request on the desk (from any task; never blocks). On a closed desk it
        is settled `None` at once."""
        if self.closed:
            request.settle(None)
            return
        self._open.append(request)
        self._waiting.append(request)
        self._changed.set()
        self._changed = trio.Event()

    @property
    def pending(self) -> int:
        """Requests submitted and not yet settled."""
        return sum(1 for request in self._open if not request.settled)

    def cancel_all(self) -> int:
        """Close the desk and settle every open request `None`; returns how many."""
        self.closed = True
        cancelled = sum(request.settle(None) for request in self._open)
        self._open.clear()
        self._waiting.clear()
        self._changed.set()
        return cancelled

    async def serve(self, turn: Turn, answer_within: float | None = None) -> None:
        """Ask the room about each request in turn, until the desk is closed or the
        caller's scope ends (an interrupt or a stop leaves the request open for
        `cancel_all`, after the peer was told to cancel)."""
        while not self.closed:
            if not self._waiting:
                await self._changed.wait()
                continue
            request = self._waiting.popleft()
            if request.settled:
                continue
            if self.cannot_ask is not None:
                request.settle(request.refusal)
                continue
            try:
                self.asked += 1
                choice = await turn.ask(
                    request.question, request.choices, answer_within=answer_within
                )
            except CannotAskError as exc:
                self.cannot_ask = str(exc)
                log.info("room %s: cannot ask the room (%s): refused", turn.room_id, exc)
                choice = request.refusal
            request.settle(choice)


async def asking_while(
    desk: PermissionDesk | None,
    turn: Turn,
    answer_within: float | None,
    wait: Callable[[], Awaitable[T]],
) -> T:
    """`await wait()`, the desk served meanwhile (its asking ends when `wait` does); an
    error of `wait` is raised as itself, not in a group."""
    if desk is None:
        return await wait()
    scope = trio.CancelScope()

    async def serve() -> None:
        with scope:
            await desk.serve(turn, answer_within)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            try:
                return await wait()
            finally:
                scope.cancel()
    except BaseExceptionGroup as group:
        errors = [e for e in group.exceptions if isinstance(e, Exception)]
        if len(errors) == len(group.exceptions) == 1:
            raise errors[0] from None
        raise
