"""The A2A JSON-RPC calls over httpx2, for one turn: send, stream, get, and the stop.

`Rpc` is made per turn around the turn's `httpx2.AsyncClient`; it is the one
seam where httpx2's errors become `A2AError`s: every request goes through
`call_upstream` (`GetTask` as the turn's call, `CancelTask` within the stop's
own deadline, the turn's first request by the adapter, which knows when a
retry would start a second task), and every body is read up to its limit
(`UpstreamPolicy.max_body`, `max_error_body`, `max_event`). Its `cancel` is the
turn's remote stop (`turn.remote(stop=rpc.cancel)`), and it reads the outcome from
the peer's own answer to `CancelTask`, which a2a-sdk sends only once the task
is terminal (a2a-sdk 1.3):

* the task, `CANCELED` (or another terminal state): `confirmed`, "task canceled";
* the task, not yet terminal: `GetTask` until it is, for most of the time left
  in the grace: `confirmed` if it got there, else `requested` with the state;
* -32002 (not cancelable): `unconfirmed`, "refused: …" and the state a
  `GetTask` shows then (a2a-sdk fails such a task anyway);
* -32001 (not found): `requested`, "already gone: …" — the peer keeps no such
  task, so nothing runs there to stop, but no terminal state was seen either;
* no answer within the grace, or another error: `unconfirmed` (the runtime's
  "no answer within …", or the error).

The stream is not read during the stop: a trio cancel that lands in a read
ends that read's iterator for good (it cannot be resumed), and the cancel
answer is the source of truth anyway. The stream is left
open while `CancelTask` runs, and closed after it.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import Any

import httpx2
import trio

from ..contract import (
    StopAnswer,
    StopOutcome,
    Turn,
    UpstreamFault,
    call_upstream,
    check_status,
    fault_of,
    read_body,
    request_body,
    server_sent_events,
)
from ..policy import UpstreamPolicy
from ._a2a_wire import (
    LIST_PAGE_SIZE,
    METHOD_NOT_FOUND,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    TERMINAL,
    A2AError,
    A2ARpcError,
    Dialect,
    Event,
    TaskSnapshot,
    decode,
    event_of,
    listed_tasks,
    result_of,
    task_of,
)

__all__ = ["EventStream", "Rpc"]

log = logging.getLogger("band_trio.adapters.a2a")

PEER = "the A2A agent"


class Rpc:
    """The JSON-RPC endpoint of one peer, spoken in one dialect, for one turn.

    After a non-terminal `CancelTask` answer, `GetTask` is polled for
    `UpstreamPolicy.confirm_share` of the time left to the stop's deadline (the
    runtime's `backend_stop_grace`), at most `confirm_cap`, so that the `requested`
    outcome is still reported before the grace ends."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        dialect: Dialect,
        *,
        poll_interval: float,
        upstream: UpstreamPolicy,
        turn: Turn | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.dialect = dialect
        self.poll_interval = poll_interval
        self.upstream = upstream
        self.turn = turn
        self._ids = 0

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        return self.dialect.request(self._ids, method, params)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request (one attempt) and its JSON-RPC result; its error raised as
        `A2ARpcError`, an error status as `UpstreamFault`, for `call_upstream` to judge."""
        what = f"the {method} answer"
        _, body = await request_body(
            self.client,
            "POST",
            self.url,
            self.upstream,
            what=what,
            json=self._body(method, params),
            headers=self.dialect.headers,
        )
        return result_of(decode(body, what), what)

    async def retried(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """`call`, asked again under the retry rules (for the turn, if it has one)."""

        async def attempt() -> dict[str, Any]:
            return await self.call(method, params)

        return await call_upstream(
            self.turn, attempt, peer=PEER, upstream=self.upstream, error=A2AError
        )

    async def get(self, task_id: str) -> TaskSnapshot:
        return task_of(await self.retried(self.dialect.get, {"id": task_id}))

    async def find(self, message_id: str, context_id: str | None) -> TaskSnapshot | None:
        """`ListTasks` (1.0): the task whose history holds our message `message_id` (in
        `context_id`, if known), else None. Pages are read (newest first) until it is found
        or the list ends: the caller bounds the whole by `UpstreamPolicy.lookup_grace`.
        A peer without `ListTasks` raises `A2ARpcError` (-32601), as does the 0.3 dialect."""
        if self.dialect.list is None:
            raise A2ARpcError(METHOD_NOT_FOUND, "A2A 0.3 has no ListTasks")
        params: dict[str, Any] = {"pageSize": LIST_PAGE_SIZE}
        if context_id:
            params["contextId"] = context_id
        while True:
            tasks, token = listed_tasks(await self.retried(self.dialect.list, params))
            for task in tasks:
                if message_id in task.message_ids:
                    return task
            if token is None or token == params.get("pageToken"):
                return None
            params["pageToken"] = token

    async def open_stream(self, params: dict[str, Any]) -> EventStream:
        """`SendStreamingMessage`, open. An error before the first event comes back as
        `application/json`, not SSE (a2a-sdk 1.3): it is raised here, so the caller may
        retry in another dialect."""
        method = self.dialect.stream
        headers = {**self.dialect.headers, "accept": "text/event-stream"}
        request = self.client.build_request(
            "POST", self.url, json=self._body(method, params), headers=headers
        )
        response = await self.client.send(request, stream=True)  # a fault: the caller's retry
        try:
            await check_status(response, self.upstream)
            if "text/event-stream" in response.headers.get("content-type", ""):
                return EventStream(response, self.upstream)
            what = f"the {method} answer"
            body = decode(await read_body(response, self.upstream.max_body, what=what), what)
            return EventStream(response, self.upstream, first=event_of(result_of(body, what)))
        except BaseException:
            await _close(response, self.upstream.close_grace)
            raise

    async def cancel(self, task_id: str) -> StopAnswer:
        """The turn's remote stop: `CancelTask`, judged by the peer's answer (module doc).

        Retried under the rules only within the stop's own deadline (it runs shielded
        under `backend_stop_grace`), never past it."""

        async def attempt() -> dict[str, Any]:
            return await self.call(self.dialect.cancel, {"id": task_id})

        try:
            answer = await call_upstream(
                None, attempt, peer=PEER, upstream=self.upstream, error=A2AError
            )
            task = task_of(answer)
        except A2ARpcError as error:
            if error.code == TASK_NOT_CANCELABLE:
                state = await self._state_now(task_id)
                later = f"; the task is {state} now" if state else ""
                return StopOutcome.UNCONFIRMED, f"refused: {error}{later}"
            if error.code == TASK_NOT_FOUND:
                return StopOutcome.REQUESTED, f"already gone: {error}"
            raise
        state = task.state if task.state in TERMINAL else await self._until_terminal(task)
        if state in TERMINAL:
            return StopOutcome.CONFIRMED, f"task {state}"
        return StopOutcome.REQUESTED, f"accepted; the task is {state}"

    async def _until_terminal(self, task: TaskSnapshot) -> str:
        """`GetTask` until the task is terminal, within a share of the stop's grace."""
        state = task.state
        with trio.move_on_at(self._confirm_deadline()), suppress(A2AError):
            while state not in TERMINAL:
                await trio.sleep(self.poll_interval)
                state = (await self.get(task.id)).state
        return state

    async def _state_now(self, task_id: str) -> str | None:
        with trio.move_on_at(self._confirm_deadline()), suppress(A2AError):
            return (await self.get(task_id)).state
        return None

    def _confirm_deadline(self) -> float:
        now = trio.current_time()
        end = min(trio.current_effective_deadline(), now + self.upstream.confirm_cap)
        return now + self.upstream.confirm_share * max(0.0, end - now)


class EventStream:
    """The events of one `SendStreamingMessage` response, read one at a time."""

    def __init__(
        self, response: httpx2.Response, upstream: UpstreamPolicy, *, first: Event | None = None
    ) -> None:
        self.response = response
        self.upstream = upstream
        self._first = first
        self._ended = first is not None  # a JSON answer: that one event is all
        self.lost: httpx2.HTTPError | None = None
        """What broke the stream, if it did not end on its own (a drop, a read timeout)."""
        # an async generator in fact (the contract types it as an iterator): closed in aclose
        self._frames = server_sent_events(response, max_event=upstream.max_event)

    async def next(self) -> Event | None:
        """The next event; None once the stream ended, or was lost (a transport error:
        logged, and the caller follows the task another way)."""
        if self._first is not None:
            event, self._first = self._first, None
            return event
        if self._ended:
            return None
        try:
            frame = await anext(self._frames, None)
        except httpx2.HTTPError as exc:
            log.info("the A2A stream from %s was lost: %r", self.response.url, exc)
            self.lost, frame = exc, None
        if frame is None:
            self._ended = True
            return None
        what = "an A2A stream frame" + (f" ({frame.event})" if frame.event != "message" else "")
        return event_of(result_of(decode(frame.data, what), what))

    def fault(self) -> Exception:
        """Why the stream gave no event, as a fault of the attempt (lost, or ended)."""
        if self.lost is not None:
            return UpstreamFault(fault_of(self.lost))
        return UpstreamFault.truncated("the A2A stream ended before its first event")

    async def aclose(self) -> None:
        """Close the response (shielded, bounded: this runs after a cancel too)."""
        with trio.move_on_after(self.upstream.close_grace, shield=True):
            try:
                await self._frames.aclose()
            finally:
                await self.response.aclose()


async def _close(response: httpx2.Response, grace: float) -> None:
    with trio.move_on_after(grace, shield=True):
        await response.aclose()
