"""One ACP session's updates, as the agent's reader hands them over, and one prompt's answer.

What a prompt turn looks like (`opencode acp` 1.18.33, observed; ACP protocol 1):
`session/prompt` is a request answered only when the turn is over, with a
`stopReason` (`end_turn`, `max_tokens`, `max_turn_requests`, `refusal`,
`cancelled`). Meanwhile the agent sends `session/update` notifications:
`agent_message_chunk` (a piece of the answer, `content.text`, chunks of one
message sharing a `messageId`), `agent_thought_chunk`, `tool_call` (`toolCallId`,
`title`, `kind`, `status`) and `tool_call_update` (the fields that changed),
`plan`, `available_commands_update`, `usage_update`, ... For a tool that needs
it the agent asks `session/request_permission` (a request, answered as
`_acp_permissions` says). After `session/cancel` it answers the prompt with `cancelled` (60 ms
with OpenCode). `session/load` replays the whole conversation as updates before
it answers: those are not an answer, and are dropped.

Nothing here waits for I/O: `Session.feed` runs in the reader's task and only
updates state and wakes whoever waits; the turn posts the events it collected.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import trio

from ..contract import MAX_ANSWER_CHARS
from ._permission_desk import PermissionDesk

__all__ = ["Answer", "Session", "ToolEvent"]

log = logging.getLogger("band_trio.adapters.acp")

MAX_EVENTS = 64
"""Tool events one prompt posts to the room at most (the rest are counted, not posted)."""


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """A tool call of the agent's, as a Band event (`Turn.send_event`)."""

    content: str
    message_type: str
    """`tool_call` when it starts, `tool_result` when it completed or failed."""
    metadata: dict[str, Any] = field(default_factory=dict)


class Answer:
    """One prompt's answer: the agent's message chunks, and its tool calls as events."""

    def __init__(self, max_chars: int = MAX_ANSWER_CHARS, max_events: int = MAX_EVENTS) -> None:
        self.max_chars = max_chars
        self.max_events = max_events
        self._parts: list[tuple[str | None, list[str]]] = []
        self._size = 0
        self.too_long = False
        self.events: list[ToolEvent] = []
        """Events not yet posted (the turn takes them)."""
        self.dropped_events = 0
        self._posted = 0
        self._tools: dict[str, dict[str, Any]] = {}
        self._changed = trio.Event()
        self.closed = False
        """The prompt was answered: `wait_events` returns once the last ones are taken."""

    def text(self) -> str:
        """The agent's messages, one paragraph each (chunks of a message joined)."""
        messages = ("".join(chunks).strip() for _, chunks in self._parts)
        return "\n\n".join(message for message in messages if message)

    def add(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self._chunk(update)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(kind, update)

    def _chunk(self, update: dict[str, Any]) -> None:
        content = update.get("content")
        text = content.get("text") if isinstance(content, dict) else None
        if not isinstance(text, str) or not text or self.too_long:
            return
        self._size += len(text)
        if self._size > self.max_chars:
            self.too_long = True  # the turn fails now, and its stop cancels the prompt
            self._wake()
            return
        message_id = update.get("messageId")
        message_id = message_id if isinstance(message_id, str) else None
        if self._parts and self._parts[-1][0] == message_id:
            self._parts[-1][1].append(text)
        else:
            self._parts.append((message_id, [text]))

    def _tool(self, kind: str, update: dict[str, Any]) -> None:
        tool_id = update.get("toolCallId")
        if not isinstance(tool_id, str):
            return
        known = self._tools.get(tool_id)
        if known is None:
            if len(self._tools) >= 4 * self.max_events:
                return  # an agent that reports without end: its later tools go untracked
            known = self._tools[tool_id] = {"posted": set()}
        for name in ("title", "kind", "status"):
            value = update.get(name)
            if isinstance(value, str) and value:
                known[name] = value[:200]
        status = known.get("status", "pending")
        title = known.get("title") or "a tool"
        metadata = {"tool_call_id": tool_id, "kind": known.get("kind", "other"), "status": status}
        if "start" not in known["posted"]:
            known["posted"].add("start")
            self._post(ToolEvent(title, "tool_call", metadata))
        if status in ("completed", "failed") and "end" not in known["posted"]:
            known["posted"].add("end")
            detail = _tool_text(update.get("content"))
            self._post(ToolEvent(detail or f"{title}: {status}", "tool_result", metadata))

    def _post(self, event: ToolEvent) -> None:
        if self._posted >= self.max_events:
            self.dropped_events += 1
            return
        self._posted += 1
        self.events.append(event)
        self._wake()

    def tools(self) -> str:
        """The tool calls so far, each as `title (status)`, comma-separated."""
        return ", ".join(
            f"{tool.get('title') or 'a tool'} ({tool.get('status', 'pending')})"
            for tool in list(self._tools.values())[:10]
        )

    def take_events(self) -> list[ToolEvent]:
        events, self.events = self.events, []
        return events

    def close(self) -> None:
        """The prompt was answered: no more events will come."""
        self.closed = True
        self._wake()

    async def wait_events(self) -> bool:
        """Return once there are events to post (True), or none will come (False): the
        prompt was answered, or the answer passed its limit."""
        while not self.events:
            if self.closed or self.too_long:
                return False
            await self._changed.wait()
        return True

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


def _tool_text(content: Any) -> str:
    """The text of a tool call's `content` (regular content blocks; a diff by its path)."""
    texts = []
    for item in content if isinstance(content, list) else ():
        if not isinstance(item, dict):
            continue
        inner = item.get("content")
        if item.get("type") == "content" and isinstance(inner, dict):
            text = inner.get("text")
            if isinstance(text, str):
                texts.append(text)
        elif item.get("type") == "diff" and isinstance(item.get("path"), str):
            texts.append(f"edited {item['path']}")
    return "\n".join(texts)[:4000]


class Session:
    """An ACP session of one room, on one agent process; fed by the agent's reader."""

    def __init__(self, session_id: str, room_id: str) -> None:
        self.id = session_id
        self.room_id = room_id
        self.answer: Answer | None = None
        """The answer being gathered (None between prompts: late updates are dropped)."""
        self.cancelling = False
        """A `session/cancel` was sent for the prompt running now: a permission request
        it still makes is answered `cancelled`, as the protocol asks."""
        self.desk: PermissionDesk | None = None
        """Where a permission request the policy does not grant waits for the room's
        answer, while a prompt of a session configured to ask runs (`_acp_permissions`)."""
        self.granted = 0
        self.denied = 0
        self.asked = 0

    def feed(self, update: dict[str, Any]) -> None:
        """One `session/update` of this session (the reader's task: never blocks)."""
        if self.answer is not None and not self.cancelling:
            self.answer.add(update)
