"""The adapter contract: what an adapter implements, what its `Turn` offers, and
how remote work is owned by the turn.

* `Adapter` — `on_turn(turn)` per message; optional `on_started(agent)` and
  `on_room_left(room_id)` hooks, each under a deadline from the policy.
* `Turn` — the `Message`, the room's `history()` and `participants()`, `reply`
  and `send_event`, `last_abort` (the kind and reason of the last interrupt or
  stop in the room), `deadline`, and `remote(stop=...)` for work elsewhere.
* Remote work (`RemoteWork`, `StopOutcome`, `RemoteStop`) — the stop is sent
  at most once, shielded under `Policy.backend_stop_grace`, only for work that
  started and did not finish, even when the abort landed while the start call
  was in flight; the turn (and so the room's next turn) waits for it.
* Helpers built on it: `run_in_thread` (abandoned on cancel), `run_command` (a
  process group: SIGTERM, SIGKILL after `Policy.subprocess_kill_grace`),
  `stream_request` (an httpx2 stream closed by the cancel), and
  `close_tool_calls` (a valid transcript after an abort mid tool-calls).
"""

from __future__ import annotations

from ._adapter import Adapter as Adapter
from ._http import MAX_EVENT_BYTES as MAX_EVENT_BYTES
from ._http import ServerSentEvent as ServerSentEvent
from ._http import server_sent_events as server_sent_events
from ._http import stream_request as stream_request
from ._message import MAX_ANSWER_CHARS as MAX_ANSWER_CHARS
from ._message import AgentInfo as AgentInfo
from ._message import LastAbort as LastAbort
from ._message import Message as Message
from ._message import Participant as Participant
from ._process import DEFAULT_OUTPUT_LIMIT as DEFAULT_OUTPUT_LIMIT
from ._process import CommandResult as CommandResult
from ._process import run_command as run_command
from ._remote import RemoteStop as RemoteStop
from ._remote import RemoteWork as RemoteWork
from ._remote import StopAnswer as StopAnswer
from ._remote import StopFn as StopFn
from ._remote import StopOutcome as StopOutcome
from ._remote import TurnControl as TurnControl
from ._threads import run_in_thread as run_in_thread
from ._transcript import close_tool_calls as close_tool_calls
from ._transcript import not_run_note as not_run_note
from ._turn import Turn as Turn
from ._turn import TurnPort as TurnPort

__all__ = [
    "DEFAULT_OUTPUT_LIMIT",
    "MAX_ANSWER_CHARS",
    "MAX_EVENT_BYTES",
    "Adapter",
    "AgentInfo",
    "CommandResult",
    "LastAbort",
    "Message",
    "Participant",
    "RemoteStop",
    "RemoteWork",
    "ServerSentEvent",
    "StopAnswer",
    "StopFn",
    "StopOutcome",
    "Turn",
    "TurnControl",
    "TurnPort",
    "close_tool_calls",
    "not_run_note",
    "run_command",
    "run_in_thread",
    "server_sent_events",
    "stream_request",
]
