"""The A2A JSON-RPC calls over httpx2, for one turn: send, stream, get, and the stop.

`Rpc` is made per turn around the turn's `httpx2.AsyncClient`; it is the one
seam where httpx2's errors become `A2AError`s. Its `cancel` is the turn's
remote stop (`turn.remote(stop=rpc.cancel)`), and it reads the outcome from
the peer's own answer to `CancelTask`, which a2a-sdk sends only once the task
is terminal (spec/peers.md §1.5):

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
answer is the source of truth anyway (peers.md §1.8). The stream is left
open while `CancelTask` runs, and closed after it.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import Any

import httpx2
import trio

from ..contract import StopAnswer, StopOutcome, server_sent_events
from ._a2a_wire import (
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
    result_of,
    task_of,
)

__all__ = ["EventStream", "Rpc"]

log = logging.getLogger("band_trio.adapters.a2a")

_CLOSE_GRACE = 1.0
"""Shielded time to close a stream's response after a cancel."""
_CONFIRM_SHARE = 0.8
"""After a non-terminal `CancelTask` answer, `GetTask` is polled for this share of the
time left to the stop's deadline (the runtime's `backend_stop_grace`), so that the
`requested` outcome is still reported before the grace ends."""
_CONFIRM_CAP = 5.0
"""... and for at most this long (a stop run without a deadline)."""
_ERROR_BODY = 2048


class Rpc:
    """The JSON-RPC endpoint of one peer, spoken in one dialect, for one turn."""

    def __init__(
        self, client: httpx2.AsyncClient, url: str, dialect: Dialect, *, poll_interval: float
    ) -> None:
        self.client = client
        self.url = url
        self.dialect = dialect
        self.poll_interval = poll_interval
        self._ids = 0

    def _body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._ids += 1
        return self.dialect.request(self._ids, method, params)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request and its JSON-RPC result (its error raised as `A2ARpcError`)."""
        body = self._body(method, params)
        try:
            response = await self.client.post(self.url, json=body, headers=self.dialect.headers)
        except httpx2.HTTPError as exc:
            raise A2AError(f"{method} to {self.url} failed: {exc!r}") from exc
        _check_status(response, method, response.content)
        return result_of(decode(response.content, f"the {method} answer"), f"the {method} answer")

    async def get(self, task_id: str) -> TaskSnapshot:
        return task_of(await self.call(self.dialect.get, {"id": task_id}))

    async def open_stream(self, params: dict[str, Any]) -> EventStream:
        """`SendStreamingMessage`, open. An error before the first event comes back as
        `application/json`, not SSE (peers.md §1.7): it is raised here, so the caller may
        retry in another dialect."""
        method = self.dialect.stream
        headers = {**self.dialect.headers, "accept": "text/event-stream"}
        request = self.client.build_request(
            "POST", self.url, json=self._body(method, params), headers=headers
        )
        try:
            response = await self.client.send(request, stream=True)
        except httpx2.HTTPError as exc:
            raise A2AError(f"{method} to {self.url} failed: {exc!r}") from exc
        try:
            if response.status_code >= 400:
                _check_status(response, method, await _head(response))
            if "text/event-stream" in response.headers.get("content-type", ""):
                return EventStream(response)
            what = f"the {method} answer"
            body = decode(await response.aread(), what)
            return EventStream(response, first=event_of(result_of(body, what)))
        except BaseException:
            await _close(response)
            raise

    async def cancel(self, task_id: str) -> StopAnswer:
        """The turn's remote stop: `CancelTask`, judged by the peer's answer (module doc)."""
        try:
            task = task_of(await self.call(self.dialect.cancel, {"id": task_id}))
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
        with trio.move_on_at(_confirm_deadline()), suppress(A2AError):
            while state not in TERMINAL:
                await trio.sleep(self.poll_interval)
                state = (await self.get(task.id)).state
        return state

    async def _state_now(self, task_id: str) -> str | None:
        with trio.move_on_at(_confirm_deadline()), suppress(A2AError):
            return (await self.get(task_id)).state
        return None


def _confirm_deadline() -> float:
    now = trio.current_time()
    end = min(trio.current_effective_deadline(), now + _CONFIRM_CAP)
    return now + _CONFIRM_SHARE * max(0.0, end - now)


class EventStream:
    """The events of one `SendStreamingMessage` response, read one at a time."""

    def __init__(self, response: httpx2.Response, *, first: Event | None = None) -> None:
        self.response = response
        self._first = first
        self._ended = first is not None  # a JSON answer: that one event is all
        # an async generator in fact (the contract types it as an iterator): closed in aclose
        self._frames = server_sent_events(response)

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
            log.warning("the A2A stream from %s was lost: %r", self.response.url, exc)
            frame = None
        if frame is None:
            self._ended = True
            return None
        what = "an A2A stream frame" + (f" ({frame.event})" if frame.event != "message" else "")
        return event_of(result_of(decode(frame.data, what), what))

    async def aclose(self) -> None:
        """Close the response (shielded, bounded: this runs after a cancel too)."""
        with trio.move_on_after(_CLOSE_GRACE, shield=True):
            try:
                await self._frames.aclose()
            finally:
                await self.response.aclose()


async def _head(response: httpx2.Response) -> bytes:
    body = b""
    async for part in response.aiter_bytes():
        body += part
        if len(body) >= _ERROR_BODY:
            break
    return body


def _check_status(response: httpx2.Response, method: str, body: bytes) -> None:
    if response.status_code >= 400:
        detail = body[:_ERROR_BODY].decode("utf-8", "replace").strip()
        raise A2AError(f"{method} answered HTTP {response.status_code}: {detail[:300]}")


async def _close(response: httpx2.Response) -> None:
    with trio.move_on_after(_CLOSE_GRACE, shield=True):
        await response.aclose()
