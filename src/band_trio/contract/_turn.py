"""The `Turn` an adapter is handed: one reasoning cycle for one message.

The runtime runs `Adapter.on_turn` inside the turn's cancel scope: an
interrupt or stop from the room's users cancels it, so an adapter needs no
flags of its own to stop — it lets `trio.Cancelled` through (cleanup in
`finally` is fine; swallowing it does not make the turn a success). What runs
*elsewhere* is registered with `Turn.remote`, which stops it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from ..policy import Policy, UpstreamPolicy
from ._ask import Question
from ._message import LastAbort, Message, Participant
from ._remote import RemoteStop, RemoteWork, StopFn, TurnControl

__all__ = ["Turn", "TurnPort"]

_DEFAULT = Policy()
"""The defaults a turn built without a runtime (a test, a script) falls back on."""

H = TypeVar("H")


class TurnPort(Protocol):
    """How a `Turn` reaches the platform; implemented by the runtime."""

    async def post_message(self, content: str, mentions: Sequence[str]) -> str: ...

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str: ...

    async def history(self) -> list[Message]: ...

    async def participants(self) -> list[Participant]: ...

    async def ask(self, question: Question) -> str:
        """Put `question` to who may answer it; return the choice picked (one of
        `question.choices`, as given), or `question.default` at its timeout. Raises
        `errors.CannotAskError` if the port has nobody to ask."""
        ...

    def take_guidance(self) -> tuple[Message, ...]:
        """The messages offered to the turn since the last call; taking them makes
        them the turn's (synchronous, no I/O). A port with no room returns ()."""
        ...

    async def wait_guidance(self) -> None:
        """Return once guidance is waiting to be taken (never, for a port that
        offers none: the caller's deadline or cancel ends the wait)."""
        ...


class Turn:
    """One reasoning cycle for one message, as the adapter sees it."""

    __slots__ = ("_control", "_history", "_participants", "_port", "last_abort", "message")

    def __init__(
        self,
        message: Message,
        port: TurnPort,
        *,
        control: TurnControl | None = None,
        last_abort: LastAbort | None = None,
    ) -> None:
        self.message = message
        self._port = port
        self._control = control or TurnControl(
            message.room_id, message.id, stop_grace=_DEFAULT.backend_stop_grace
        )
        self.last_abort = last_abort
        """The last interrupt or stop that aborted a turn in this room before this one
        (None if there was none in this run of the agent): tell the model why its
        previous answer was cut off."""
        self._history: list[Message] | None = None
        self._participants: list[Participant] | None = None

    @property
    def room_id(self) -> str:
        return self.message.room_id

    @property
    def deadline(self) -> float:
        """When the turn is cancelled if still running (trio clock; `inf`: no deadline).

        Set by `Policy.turn_deadline`; a turn that reaches it is marked `failed`."""
        return self._control.deadline

    @property
    def stop_grace(self) -> float:
        """`Policy.backend_stop_grace`: how long one remote stop may take."""
        return self._control.stop_grace

    @property
    def kill_grace(self) -> float:
        """`Policy.subprocess_kill_grace`: SIGTERM to SIGKILL for a process group."""
        return self._control.kill_grace

    @property
    def upstream(self) -> UpstreamPolicy:
        """`Policy.upstream`: how calls to an upstream retry, wait and read
        (`call_upstream` uses it unless given an adapter's own)."""
        return self._control.upstream

    @property
    def posted(self) -> int:
        """How many messages and events this turn has posted to the room so far."""
        return self._control.posted

    @property
    def aborted(self) -> bool:
        """Whether the turn was interrupted or stopped (its scope is being cancelled)."""
        return self._control.aborted_at is not None

    @property
    def remote_works(self) -> tuple[RemoteWork[Any], ...]:
        """The remote works this turn registered so far (`is_started`, `is_finished`,
        `stop_result`): what a test or the conformance kit looks at."""
        return tuple(self._control.works)

    async def wait_remote_change(self) -> None:
        """Return at the next change of this turn's remote work (started, finished,
        stopped); for tests and the conformance kit, which set the deadline."""
        await self._control.wait_changed()

    @property
    def remote_stops(self) -> tuple[RemoteStop, ...]:
        """The remote stops this turn sent so far, with their outcomes."""
        return tuple(self._control.stops)

    def over(self, wrap: Callable[[TurnPort], TurnPort]) -> Turn:
        """This turn — its message, control and last abort — over `wrap(port)`, a port
        that passes calls on to this turn's (one that watches them: the conformance
        kit's). Its remote works, stops, posts and deadline are this turn's."""
        port = wrap(self._port)
        return Turn(self.message, port, control=self._control, last_abort=self.last_abort)

    # -- the room -------------------------------------------------------------

    async def history(self) -> Sequence[Message]:
        """The room's recent messages as the platform gives them to the agent (all it
        posted, events of every type included, and the text messages that mention it,
        oldest first; `GET .../context`): `Message.message_type` tells them apart.

        Fetched once per turn; the message being answered is included."""
        if self._history is None:
            self._history = await self._port.history()
        return tuple(self._history)

    async def participants(self) -> Sequence[Participant]:
        """The room's members (`GET .../participants`), fetched once per turn."""
        if self._participants is None:
            self._participants = await self._port.participants()
        return tuple(self._participants)

    # -- speaking -------------------------------------------------------------

    async def reply(self, content: str, *, mentions: Sequence[str] | None = None) -> str:
        """Post `content` to the room; returns the new message's id.

        Mentions are participant ids; by default the sender of the message is
        mentioned, so the reply reaches them. If the room was stopped on the
        platform meanwhile, the turn is aborted (this call raises `Cancelled`).
        """
        if not content.strip():
            raise ValueError("a reply needs non-blank content")
        targets = list(mentions) if mentions is not None else [self.message.sender_id]
        if not targets:
            raise ValueError("a reply needs at least one mention")
        self._control.posted += 1  # before the call: a post cut off may still have landed
        return await self._port.post_message(content, targets)

    async def send_event(
        self,
        content: str,
        *,
        message_type: str = "thought",
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Post a non-message event (`thought`, `tool_call`, `tool_result`, ...).

        The platform takes at most 16384 characters of content and refuses more
        (422): a longer `content` (a tool's whole output) is cut to that on the way
        out, its head and tail kept, as band-sdk cuts it."""
        self._control.posted += 1
        return await self._port.post_event(content, message_type, metadata)

    # -- the people in the room ----------------------------------------------

    async def ask(
        self,
        question: str,
        choices: Sequence[str] = ("approve", "deny"),
        *,
        answerers: Sequence[str] | None = None,
        answer_within: float | None = None,
        default: str | None = None,
    ) -> str:
        """Ask the room and wait for the answer; returns the choice picked, exactly as
        given in `choices`.

        The agent posts the question mentioning `answerers` (participant ids; by
        default the sender of the turn's message; `contract.ANYONE` lets anyone who
        is not an agent answer) and naming the choices. An answer is a message from
        one of them whose first word after any mentions is a choice, ignoring case
        (`@agent approve`), or the console's button; it never starts a turn of its
        own. The wait is part of the turn: an interrupt or a stop ends it like any
        other await (`Cancelled`). After `answer_within` seconds (`Policy.ask_timeout` by
        default) it returns `default` — the *last* choice unless given, so list the
        refusing one last — and the room is told. One question is open per room at
        a time: a second concurrent `ask` waits for the first to end.

        Raises `ValueError` for a malformed question (2 to 8 one-word choices,
        distinct ignoring case) and `errors.CannotAskError` where nobody can be
        asked. See docs/how-to/ask-the-room.md."""
        who = (self.message.sender_id,) if answerers is None else tuple(answerers)
        wait = self._control.ask_timeout if answer_within is None else answer_within
        asked = Question.make(question, choices, answerers=who, timeout=wait, default=default)
        return await self._port.ask(asked)

    def take_guidance(self) -> tuple[Message, ...]:
        """The room's messages offered to this turn since the last call, oldest first.

        In a room whose `WhileBusy` strategy is `STEER`, a message that arrives while
        the turn runs is offered to it. Taking it makes it the turn's: it is never
        answered on its own, and shares the turn's fate (marked processed with the
        turn, consumed by an interrupt, replayed with the turn after a stop). A
        message not taken runs as its own turn afterwards, in order. Synchronous and
        without I/O: call it between steps (before the next model call)."""
        return self._port.take_guidance()

    async def wait_guidance(self) -> None:
        """Return once guidance is offered, without taking it (in a room that does not
        steer, never: bound the wait)."""
        await self._port.wait_guidance()

    async def next_guidance(self) -> tuple[Message, ...]:
        """Wait until guidance is offered, then take it (`take_guidance`); the turn's
        abort or the caller's deadline ends the wait."""
        while True:
            taken = self._port.take_guidance()
            if taken:
                return taken
            await self._port.wait_guidance()

    # -- work elsewhere -------------------------------------------------------

    def remote(
        self,
        stop: StopFn[H],
        *,
        name: str = "remote work",
        grace: float | None = None,
        closes_on_cancel: bool = False,
    ) -> RemoteWork[H]:
        """Register remote work and how to stop it; use as `async with`.

            async with turn.remote(stop=cancel_task, name="a2a task") as work:
                with work.starting():          # shielded until the handle is known
                    work.started(await start_task())
                ...                            # cancellable
                work.finished()                # it ended on its own: nothing to stop

        `stop(handle)` is called at most once, shielded under
        `Policy.backend_stop_grace`, if the block is left by a cancel or an error
        (or after the turn was aborted) while the work is started and not
        finished. The turn ends — and the room's next turn starts — only once it
        has settled. `grace` replaces the stop's deadline for work whose stop has a
        known length of its own (a process group: its kill grace, plus reaping).
        `closes_on_cancel`: cancelling the start call is itself the stop (an HTTP
        stream whose server stops when the connection closes), so the start is not
        shielded and a start cut off is recorded as a `requested` stop. See
        `band_trio.contract` for the rules.
        """
        return RemoteWork(self._control, stop, name, grace, closes_on_cancel=closes_on_cancel)
