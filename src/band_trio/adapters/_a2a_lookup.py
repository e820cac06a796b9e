"""After the turn's first A2A request broke before naming its task: find that task.

The peer names the task in its first event (`SendStreamingMessage`) or in its answer
(`SendMessage`). A break before that — a reset, a 5xx or a cut mid-body, a read
timeout, a corrupt first frame — may come after the peer created the task: asking
again would start a second one, and the first would run on, never cancelled.

So before any retry the task is looked up with `ListTasks` (A2A 1.0): in the room's
`contextId` if it has one, else among the peer's newest tasks, the task whose history
holds our message's `messageId` (the client chooses it, one per turn). The lookup is
bounded by `UpstreamPolicy.lookup_grace` (and by the start's own deadline after an
interrupt). Then:

* found: the turn follows it (`GetTask`) as if the stream had named it, so the
  message is answered by the one task; an interrupt or stop cancels it (the turn's
  remote stop, in `Turn.remote_stops`). After a corrupt first frame the task is
  stopped instead: the peer cannot be read.
* not found: no task exists for the message, and the request is asked again under
  the retry rules.
* not known (0.3 has no `ListTasks`, the peer answers -32601, the lookup failed or
  ran out of time): one WARNING names the peer and the message id, and the turn
  fails without asking again — a task may be running there.

A request that never reached the peer (no connection) or that it refused (408, 429,
503: it did not take it) needs no lookup and is asked again. A task the peer stored
only after the lookup looked is not found: the lookup narrows the window, it cannot
close it on a peer that names its tasks late.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx2
import trio

from ..contract import RemoteWork, UpstreamFault, fault_of
from ..errors import PeerProtocolError
from ..retry import FaultKind
from ._a2a_rpc import Rpc
from ._a2a_wire import TERMINAL, A2AError, A2AProtocolError, Answer, Dialect, TaskSnapshot

__all__ = ["BROKEN_START", "Ask", "recover"]

log = logging.getLogger("band_trio.adapters.a2a")

BROKEN_START = (UpstreamFault, httpx2.HTTPError, A2AProtocolError, PeerProtocolError)
"""What a first request may raise after the peer created its task."""
_REFUSED = frozenset({408, 429, 503})
"""Statuses by which the peer says it did not take the request."""


@dataclass(frozen=True, slots=True)
class Ask:
    """The turn's message, as each attempt sends it (in the dialect then spoken)."""

    text: str
    message_id: str
    """Chosen here, once per turn: the key by which a task started unnamed is found."""
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] | None = None

    def params(self, dialect: Dialect) -> dict[str, Any]:
        message = dialect.message(
            self.text,
            self.message_id,
            context_id=self.context_id,
            task_id=self.task_id,
            metadata=self.metadata,
        )
        return {"message": message}


async def recover(
    rpc: Rpc, ask: Ask, error: Exception, answer: Answer, work: RemoteWork[str]
) -> None:
    """Called in the start's `except` (inside `work.starting()`): returns once the task
    the failed request started was found and `answer` holds it (non-terminal: `started`);
    re-raises `error` if no task was started, and raises a non-retried `A2AError` if
    that is not known (module doc)."""
    if _never_taken(error):
        raise error
    found: TaskSnapshot | None = None
    known, why = False, f"no answer to ListTasks within {rpc.upstream.lookup_grace:g} s"
    with trio.move_on_after(rpc.upstream.lookup_grace):
        try:
            found = await rpc.find(ask.message_id, ask.context_id)
            known = True
        except A2AError as exc:
            why = f"ListTasks failed: {exc}"
    if known and found is None:
        log.info("%s holds no task for message %s: asking again", rpc.url, ask.message_id)
        raise error
    if found is None:
        log.warning(
            "the A2A agent at %s may be running a task for message %s, not asked again"
            " (its first answer broke: %s; %s)",
            rpc.url,
            ask.message_id,
            error,
            why,
        )
        raise A2AError(
            f"the A2A agent's first answer broke ({error}) and whether it started a task"
            f" is not known ({why}): not asked again"
        ) from error
    answer.add(found)
    log.info("found task %s for message %s after: %s", answer.task_id, ask.message_id, error)
    if answer.task_id is not None and answer.state not in TERMINAL:
        work.started(answer.task_id)
    if isinstance(error, (A2AProtocolError, PeerProtocolError)):
        raise error  # the peer cannot be read: its task is stopped, not followed


def _never_taken(error: Exception) -> bool:
    """The request never reached the peer, or the peer refused it: no task exists."""
    fault = error.fault if isinstance(error, UpstreamFault) else None
    if fault is None and isinstance(error, httpx2.HTTPError):
        fault = fault_of(error)
    if fault is None:
        return False
    return fault.kind is FaultKind.UNSENT or (
        fault.kind is FaultKind.STATUS and fault.status in _REFUSED
    )
