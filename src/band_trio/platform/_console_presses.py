"""The console's interrupt/stop/play presses and what each one measurably caused.

A press is timed from the platform's own request log, the same stamps the
benchmarks read, so the figures a person sees in the page are the figures a
benchmark would report: the `agent.control` frame written to the agent's
socket is the start, and the agent's answers are the effects —

* `processed` (the interrupted message consumed: `POST .../processed`; the
  runtime sends it first),
* `working:false` (its `POST .../activity` saying it stopped working: the turn
  was cancelled and settled),
* `next` / `claimed` (after play: the room re-entered through `GET .../next`
  and the held message claimed again with `POST .../processing`).

The book reads the log incrementally from a cursor, so a busy platform costs
each pump only the entries since the last one; entries the ring dropped
before they were read are noted on the presses still open.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Literal

from ..wire.admin import AdminLogEntry
from ._log import RequestLog

__all__ = ["EFFECTS", "Press", "PressBook"]

Mode = Literal["interrupt", "stop", "play"]

EFFECTS: dict[str, tuple[str, ...]] = {
    "interrupt": ("processed", "working:false"),
    "stop": ("working:false",),
    "play": ("next", "claimed"),
}
"""The effects each kind of press is watched for, in the order they happen."""


@dataclass(slots=True)
class Press:
    """One press, and the stamps of its effects as the log shows them."""

    id: int
    mode: Mode
    agent_id: str
    room_id: str | None
    pressed: float
    """`perf_counter()` when the platform took the press."""
    expires: float
    delivered: bool
    """Whether the agent had a live socket to push the control to."""
    was_working: bool
    """Whether the agent reported working in the room (any room, agent-wide) then."""
    correlation_id: str
    """The control's id, which its frame carries."""
    sent: float | None = None
    """The stamp of the `agent.control` frame written to the agent's socket."""
    effects: dict[str, float] = field(default_factory=dict)
    lost_log: bool = False

    @property
    def done(self) -> bool:
        return all(name in self.effects for name in EFFECTS[self.mode])

    def view(self, now: float) -> dict[str, Any]:
        start = self.sent if self.sent is not None else self.pressed
        state = "done" if self.done else ("waiting" if now < self.expires else "timed out")
        return {
            "id": self.id,
            "mode": self.mode,
            "agent_id": self.agent_id,
            "room_id": self.room_id,
            "state": state,
            "delivered": self.delivered,
            "was_working": self.was_working,
            "sent_ms": None if self.sent is None else _ms(self.sent - self.pressed),
            "effects": {name: _ms(t - start) for name, t in self.effects.items()},
            "watched": list(EFFECTS[self.mode]),
            "note": self._note(state),
        }

    def _note(self, state: str) -> str | None:
        if not self.delivered:
            return "the agent was not connected: the signal was recorded but not pushed"
        if self.lost_log:
            return "the request log dropped entries before they were read: figures may be missing"
        if state == "timed out" and not self.was_working and self.mode != "play":
            return "the agent was not working: there was no turn to cancel"
        if state == "timed out":
            return "not every effect was seen in the request log in time"
        return None


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


class PressBook:
    """The last few presses, their effects filled in from the request log."""

    def __init__(self, log: RequestLog, *, keep: int, window: float) -> None:
        self._log = log
        self._window = window
        self._cursor = log.next_seq
        self._presses: deque[Press] = deque(maxlen=keep)
        self._ids = 0

    def add(
        self,
        mode: Mode,
        agent_id: str,
        room_id: str | None,
        *,
        delivered: bool,
        was_working: bool,
        correlation_id: str,
    ) -> Press:
        """Record a press made just now; call it right after the control was queued."""
        self._ids += 1
        now = perf_counter()
        press = Press(
            self._ids, mode, agent_id, room_id, now, now + self._window, delivered,
            was_working, correlation_id,
        )  # fmt: skip
        self._presses.append(press)
        return press

    def open_until(self) -> float | None:
        """The latest expiry of a press still waiting for an effect (None if none is)."""
        waiting = [p.expires for p in self._presses if not p.done]
        return max(waiting) if waiting else None

    def views(self) -> list[dict[str, Any]]:
        self.pump()
        now = perf_counter()
        return [p.view(now) for p in reversed(self._presses)]

    def pump(self) -> None:
        """Read the log entries appended since the last pump into the open presses."""
        log = self._log
        if log.next_seq == self._cursor:
            return
        entries = log.since(self._cursor)
        lost = not entries or entries[0].seq > self._cursor
        self._cursor = log.next_seq
        now = perf_counter()
        open_presses = [p for p in self._presses if not p.done and now < p.expires]
        for press in open_presses:
            press.lost_log = press.lost_log or lost
        for entry in entries:
            for press in open_presses:
                _apply(press, entry)


def _apply(press: Press, entry: AdminLogEntry) -> None:
    if entry.agent_id != press.agent_id or entry.t < press.pressed:
        return
    if entry.kind == "ws_out":
        if press.sent is None and entry.frame and press.correlation_id in entry.frame:
            press.sent = entry.t
        return
    if entry.kind != "rest" or entry.path is None:
        return
    effect = _effect(entry)
    if effect is None:
        return
    name, room = effect
    if press.room_id is not None and room != press.room_id:
        return
    if name in EFFECTS[press.mode]:
        press.effects.setdefault(name, entry.t)


def _effect(entry: AdminLogEntry) -> tuple[str, str] | None:
    """`(effect, room id)` for a REST entry that is one of the watched effects."""
    parts = entry.path.strip("/").split("/") if entry.path else []
    # api/v1/agent/chats/{room}/activity | .../messages/next | .../messages/{id}/{mark}
    if len(parts) < 6 or parts[3] != "chats" or (entry.status or 0) >= 300:
        return None
    room = parts[4]
    if entry.method == "POST" and parts[5:] == ["activity"]:
        return ("working:false", room) if not _working(entry.body) else None
    if entry.method == "GET" and parts[5:] == ["messages", "next"]:
        return "next", room
    if entry.method == "POST" and len(parts) == 8 and parts[5] == "messages":
        mark = parts[7]
        if mark == "processed":
            return "processed", room
        if mark == "processing":
            return "claimed", room
    return None


def _working(body: str | None) -> bool:
    try:
        value = json.loads(body or "{}")
    except ValueError:
        return True
    return bool(value.get("working")) if isinstance(value, dict) else True
