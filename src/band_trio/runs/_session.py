"""A session: the runs that share a conversation, and the `TurnPort` of one of its runs.

A run is a turn whose room is its session (`session_id`, the run's own id by
default): the adapter sees `Turn.room_id == session_id`, so an adapter that
keeps a conversation per room (the OpenAI chat adapter) keeps one per
session, and a stopped run's reason reaches the session's next run as
`Turn.last_abort` — the model is told why its previous answer was cut off.
Runs of one session are serial (`Session.lock`, FIFO): the next
starts once the previous one, remote stop included, has settled, as a room's
next turn does.

`RunPort` turns what the adapter says into the run's events:

    turn.reply(text)                           message.delta        {"delta"}
    turn.send_event(.., message_type=...)
        "tool_call"                            tool.started         {"tool", "preview"}
        "tool_result"                          tool.completed       {"tool", "duration", "error"}
        "thought"                              reasoning.available  {"text"}
        anything else                          status.update        {"message_type", "text"}
    turn.ask(question)                         approval.request     (`_approvals`), answered
                                                                    by POST /approval
    turn.take_guidance() / wait_guidance()     what POST /steer offered (`_guidance`), as
                                               messages from the API client
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio

from ..contract import LastAbort, Message, Participant, Question

if TYPE_CHECKING:
    from ._run import Run

__all__ = ["PARTICIPANTS", "RunPort", "Session"]

PARTICIPANTS = (
    Participant(id="user", type="User", role="member", name="API client"),
    Participant(id="agent", type="Agent", role="member", name="band-trio"),
)
_PREVIEW = 200


class Session:
    """What the runs of one `session_id` share."""

    __slots__ = ("id", "last_abort", "lock", "messages", "runs")

    def __init__(self, session_id: str, limit: int) -> None:
        self.id = session_id
        self.messages: deque[Message] = deque(maxlen=limit)
        """The session's conversation: each run's input and replies, oldest first."""
        self.last_abort: LastAbort | None = None
        """The last stop of one of its runs (its reason is the run's `cancel_reason`)."""
        self.lock = trio.Lock()
        """Held by the session's running run: runs of one session are serial."""
        self.runs = 0
        """Runs of this session still kept (live or in their retention window)."""


class RunPort:
    """The `contract.TurnPort` of one run: what its adapter says becomes its events."""

    __slots__ = ("_count", "_run", "_tools")

    def __init__(self, run: Run) -> None:
        self._run = run
        self._tools: dict[str, float] = {}
        self._count = 0

    def _next_id(self) -> str:
        self._count += 1
        return f"{self._run.id}-{self._count}"

    async def history(self) -> list[Message]:
        """The session's conversation up to this run, the client's `instructions` and
        `conversation_history`, then the run's own input and what it said so far (as a
        room's context holds the message being answered)."""
        run = self._run
        given = []
        if run.request.instructions:
            given.append(self._given("System", run.request.instructions, 0))
        given += [
            self._given(entry.sender_type, entry.content, index)
            for index, entry in enumerate(run.request.history, start=1)
        ]
        messages = list(run.session.messages)
        at = next((i for i, m in enumerate(messages) if m is run.message), len(messages))
        return [*messages[:at], *given, *messages[at:]]

    def _given(self, sender_type: str, content: str, index: int) -> Message:
        sender = {"User": "user", "Agent": "agent"}.get(sender_type, "system")
        return Message(
            id=f"{self._run.id}-h{index}",
            room_id=self._run.session.id,
            content=content,
            sender_id=sender,
            sender_type=sender_type,
        )

    async def participants(self) -> list[Participant]:
        return list(PARTICIPANTS)

    async def ask(self, question: Question) -> str:
        """An `approval.request` on the run's events, answered by `POST /approval`
        (`_approvals`); the wait is in the run's own scope, so a stop ends it."""
        return await self._run.approvals.ask(question)

    def take_guidance(self) -> tuple[Message, ...]:
        """What the client offered (`POST /steer`) since the last call; taken, it is
        part of the session's conversation, as a room's taken guidance is."""
        taken = self._run.guidance.take()
        self._run.session.messages.extend(taken)
        return taken

    async def wait_guidance(self) -> None:
        await self._run.guidance.wait()

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        await trio.lowlevel.checkpoint()  # a stopped run says nothing more
        run = self._run
        delta = run.add_output(("\n\n" if run.has_output else "") + content)
        message_id = self._next_id()
        if delta:
            run.events.emit("message.delta", delta=delta)
        run.session.messages.append(
            Message(
                id=message_id,
                room_id=run.session.id,
                content=content,
                sender_id="agent",
                sender_type="Agent",
                mentions=tuple(mentions),
            )
        )
        return message_id

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        await trio.lowlevel.checkpoint()
        events = self._run.events
        meta = metadata or {}
        tool = str(meta.get("name") or content.partition("(")[0])[:_PREVIEW]
        call_id = str(meta.get("tool_call_id") or tool)
        if message_type == "tool_call":
            self._tools[call_id] = time.perf_counter()
            events.emit("tool.started", tool=tool, preview=content[:_PREVIEW])
        elif message_type == "tool_result":
            began = self._tools.pop(call_id, None)
            duration = 0.0 if began is None else round(time.perf_counter() - began, 6)
            error = content.startswith("error:")
            events.emit("tool.completed", tool=tool, duration=duration, error=error)
        elif message_type == "thought":
            events.emit("reasoning.available", text=content[: self._run.max_event_text])
        else:
            text = content[: self._run.max_event_text]
            events.emit("status.update", message_type=message_type[:_PREVIEW], text=text)
        return self._next_id()
