"""The adapter contract: what an adapter implements, what its `Turn` offers, and
how remote work is owned by the turn.

* `Adapter` — `on_turn(turn)` per message; optional `on_started(agent)` and
  `on_room_left(room_id)` hooks, each under a deadline from the policy.
* `Turn` — the `Message`, the room's `history()` and `participants()`, `reply`
  and `send_event`, `last_abort` (the kind and reason of the last interrupt or
  stop in the room), `deadline`, and `remote(stop=...)` for work elsewhere.
* The people in the room — `Turn.ask(question, choices)` waits, in the turn's
  scope and under a deadline, for a person to pick a choice (`Question`, what a
  `TurnPort` receives; `chosen`, how a reply picks one; `ANYONE`); and
  `Turn.take_guidance()` takes the messages offered to the running turn in a
  room that steers (`WhileBusy.STEER`).
* Remote work (`RemoteWork`, `StopOutcome`, `RemoteStop`) — the stop is sent
  at most once, shielded under `Policy.backend_stop_grace`, only for work that
  started and did not finish, even when the abort landed while the start call
  was in flight; the turn (and so the room's next turn) waits for it. A start
  cut by its deadline raises `StartCutError` (`band_trio.errors`).
* For the owners of turns (the rooms host, the runs API): `TurnControl`, the
  `Cutoff` every shielded wait of a turn ends by (a hard stop lowers it),
  `Threads` (the worker threads `run_in_thread` uses, counted: `ThreadStats`),
  and `adapter_failure` (an adapter's own `BaseException` is its failure; a
  cancel or a real Ctrl-C goes on up).
* asyncio code: `run_asyncio(async_fn, *args)` runs it as part of the turn it is
  called from (`current_turn`, set by the owner with `turn_context`), on the
  owner's asyncio loop (`AsyncioLoop`, one thread: `Threads.asyncio`); an abort
  cancels the asyncio task and waits for it, within the stop grace. (anyio code
  needs no door: below.)
* Helpers built on it: `run_in_thread` (abandoned on cancel), `run_command` (a
  process group: SIGTERM, SIGKILL after `Policy.subprocess_kill_grace`),
  `stream_request` (an httpx2 stream closed by the cancel), and
  `close_tool_calls` (a valid transcript after an abort mid tool-calls).
* Calls to an upstream: `call_upstream`, the one retry helper (Retry-After,
  backoff with full jitter, attempts capped, never after a post or an abort,
  the wait cancellable), `UpstreamFault` for an attempt to raise, and bounded
  reads (`check_status`, `read_body`, `request_body`, `upstream_timeout`), and
  `upstream_client` (those timeouts and the process's one TLS context), all
  under `Turn.upstream` (`Policy.upstream`), or an adapter's own
  `UpstreamPolicy` (`upstream_from_env` reads one from `BAND_*` variables).

Code written on anyio needs no bridge: the official `openai` and `anthropic`
SDKs, the `mcp` SDK, PydanticAI run inside `on_turn` as they are, since anyio
runs on trio. Their I/O is trio's and the turn's cancel is theirs: an
interrupt, a stop, the turn's deadline or the agent's shutdown raises where
they await, and leaving their `async with` closes their stream. What they do
not know is the turn's bookkeeping, which the adapter adds: the stream as
`turn.remote(..., closes_on_cancel=True)` (a recorded stop, sent shielded),
the library's own retries off for `call_upstream`, and a valid transcript.
`band_trio.adapters.AnthropicAdapter` does exactly that, and its abort is seen
at the model server (tests/adapters/test_anthropic.py).
"""

from __future__ import annotations

from ..policy import UpstreamPolicy as UpstreamPolicy
from ._adapter import Adapter as Adapter
from ._ask import ANYONE as ANYONE
from ._ask import Question as Question
from ._ask import chosen as chosen
from ._asyncio_job import AsyncioStats as AsyncioStats
from ._asyncio_loop import AsyncioLoop as AsyncioLoop
from ._current import current_turn as current_turn
from ._current import turn_context as turn_context
from ._cutoff import Cutoff as Cutoff
from ._env import UPSTREAM_SETTINGS as UPSTREAM_SETTINGS
from ._env import upstream_from_env as upstream_from_env
from ._failure import adapter_failure as adapter_failure
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
from ._run_asyncio import ASYNCIO_WORK as ASYNCIO_WORK
from ._run_asyncio import run_asyncio as run_asyncio
from ._threads import Threads as Threads
from ._threads import ThreadStats as ThreadStats
from ._threads import run_in_thread as run_in_thread
from ._transcript import close_tool_calls as close_tool_calls
from ._transcript import not_run_note as not_run_note
from ._turn import Turn as Turn
from ._turn import TurnPort as TurnPort
from ._upstream import UpstreamFault as UpstreamFault
from ._upstream import call_upstream as call_upstream
from ._upstream import fault_of as fault_of
from ._upstream_http import MAX_EVENT_BYTES as MAX_EVENT_BYTES
from ._upstream_http import ServerSentEvent as ServerSentEvent
from ._upstream_http import check_status as check_status
from ._upstream_http import error_detail as error_detail
from ._upstream_http import read_body as read_body
from ._upstream_http import request_body as request_body
from ._upstream_http import server_sent_events as server_sent_events
from ._upstream_http import stream_request as stream_request
from ._upstream_http import upstream_client as upstream_client
from ._upstream_http import upstream_timeout as upstream_timeout

__all__ = [
    "ANYONE",
    "ASYNCIO_WORK",
    "DEFAULT_OUTPUT_LIMIT",
    "MAX_ANSWER_CHARS",
    "MAX_EVENT_BYTES",
    "UPSTREAM_SETTINGS",
    "Adapter",
    "AgentInfo",
    "AsyncioLoop",
    "AsyncioStats",
    "CommandResult",
    "Cutoff",
    "LastAbort",
    "Message",
    "Participant",
    "Question",
    "RemoteStop",
    "RemoteWork",
    "ServerSentEvent",
    "StopAnswer",
    "StopFn",
    "StopOutcome",
    "ThreadStats",
    "Threads",
    "Turn",
    "TurnControl",
    "TurnPort",
    "UpstreamFault",
    "UpstreamPolicy",
    "adapter_failure",
    "call_upstream",
    "check_status",
    "chosen",
    "close_tool_calls",
    "current_turn",
    "error_detail",
    "fault_of",
    "not_run_note",
    "read_body",
    "request_body",
    "run_asyncio",
    "run_command",
    "run_in_thread",
    "server_sent_events",
    "stream_request",
    "turn_context",
    "upstream_client",
    "upstream_from_env",
    "upstream_timeout",
]
