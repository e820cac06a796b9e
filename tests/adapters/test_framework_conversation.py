"""What the framework adapters are given of the room (`adapters._framework.conversation`):
one piece, with a port that serves a history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from band_trio.adapters._framework import Said, conversation, cut_note
from band_trio.contract import LastAbort, Message, Participant, Turn, not_run_note

ROOM = "r1"


class History:
    """A `TurnPort` that serves `messages` as the room's history and takes no posts."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages

    async def history(self) -> list[Message]:
        return self.messages

    async def post_message(self, content: str, mentions: Sequence[str]) -> str:
        raise AssertionError("not called")

    async def post_event(
        self, content: str, message_type: str, metadata: dict[str, Any] | None
    ) -> str:
        raise AssertionError("not called")

    async def participants(self) -> list[Participant]:
        raise AssertionError("not called")


def said(id: str, sender: str, kind: str, content: str, message_type: str = "text") -> Message:
    return Message(id, ROOM, content, sender, kind, message_type=message_type)


ROOMS_HISTORY = [
    said("1", "sys", "System", "be brief"),
    said("2", "u1", "User", "hello"),
    said("3", "me", "Agent", "hi there"),
    said("4", "me", "Agent", 'lookup({"q": 1})', message_type="tool_call"),
    said("5", "other", "Agent", "I am another agent"),
    said("6", "u2", "User", "   "),
    said("7", "u1", "User", "and now?"),
    said("8", "u1", "User", "a message for a later turn"),
]


async def test_the_room_up_to_the_message_as_chat_lines_of_their_roles() -> None:
    turn = Turn(ROOMS_HISTORY[6], History(ROOMS_HISTORY))
    assert await conversation(turn, "me", 50) == [
        Said("system", "be brief", "1"),
        Said("user", "hello", "2"),
        Said("assistant", "hi there", "3"),
        Said("user", "I am another agent", "5"),  # not this agent: someone in the room
        Said("user", "and now?", "7"),
    ]
    assert [line.id for line in await conversation(turn, "me", 2)] == ["5", "7"]


async def test_without_its_own_id_every_agent_is_the_assistant_and_the_message_comes_last() -> None:
    """A run of the runs API: no `on_started`, and a history that may lack the message."""
    message = said("9", "u1", "User", "new")
    turn = Turn(message, History(ROOMS_HISTORY[:3] + ROOMS_HISTORY[4:5]))
    lines = await conversation(turn, None, 50)
    assert [(line.role, line.id) for line in lines] == [
        ("system", "1"),
        ("user", "2"),
        ("assistant", "3"),
        ("assistant", "5"),
        ("user", "9"),
    ]


def test_a_cut_call_is_told_why_when_the_last_abort_cut_it() -> None:
    message = said("7", "u1", "User", "and now?")
    told = Turn(message, History([]), last_abort=LastAbort("stop", "hold  on", "2"))
    assert cut_note("2", told) == not_run_note("stop", "hold on")
    assert cut_note("3", told).startswith("not run: the turn was cut off")  # another cut
    assert cut_note(None, told).startswith("not run: the turn was cut off")
    assert cut_note("2", Turn(message, History([]))).startswith("not run: the turn was cut off")
