"""The raw ASGI app of the runs API: Hermes 0.19's routes, payloads and errors.

    GET  /health                   {"status": "ok", "platform": "band-trio"} (no key needed)
    GET  /v1/capabilities          what this server supports (`_capabilities`)
    POST /v1/runs                  202 {"run_id", "status": "started", "replayed": false}
    GET  /v1/runs                  a page of the runs kept (`_listing`)
    GET  /v1/runs/{id}             the run's `hermes.run` status object
    GET  /v1/runs/{id}/events      server-sent events (`id:` + `data:` lines)
    POST /v1/runs/{id}/stop        200 {"run_id", "status": "stopping", ...}
    POST /v1/runs/{id}/approval    200 {"object": "hermes.run.approval_response", ...}
    POST /v1/runs/{id}/steer       200 {"object": "hermes.run.steer", ...}

Hand-written, as the embedded platform's app is, because it sits inside the
stop latency the benchmark reports: a request costs a path split, a key
compare and one msgspec encode. Errors use Hermes' envelope
(`{"error": {"message", "type", "param", "code"}}`); anything a route raises
that is not an `HttpError` is logged and answered 500, so client input never
takes the server down.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any
from urllib.parse import parse_qsl

import msgspec
import trio

from ..server import BodyTooLarge, ClientGone, HttpError, answer, answer_json, read_body
from ._capabilities import capabilities
from ._idempotency import IdempotencyKeys, fingerprint, idempotency_key
from ._listing import list_runs
from ._people import approve, steer
from ._request import BadRequest, parse_run, parse_stop
from ._run import Run
from ._service import Draining, RunsService, TooManyRuns

__all__ = ["RunsApp"]

log = logging.getLogger("band_trio.runs")

_encode = msgspec.json.Encoder().encode
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
    (b"connection", b"close"),
]
"""An event stream's connection ends with the stream (`RunsApp._events` says why)."""
_KEEPALIVE = b": keepalive\n\n"
_CLOSED = b": stream closed\n\n"
DISCONNECT_REASON = "the client disconnected"
_PEOPLE = (["approval"], ["steer"])
"""The POST routes through which people reach a running run (`_people`)."""


def _error_body(error: HttpError) -> bytes:
    """Hermes' error envelope; `kind` is its `type` (a client's mistake unless set)."""
    kind = error.kind or "invalid_request_error"
    body = {"message": error.message, "type": kind, "param": None, "code": error.code}
    return _encode({"error": body})


def _not_found(run_id: str) -> HttpError:
    return HttpError(404, "run_not_found", f"Run not found: {run_id}")


class RunsApp:
    """ASGI 3 application serving a `RunsService` behind a bearer key."""

    def __init__(self, service: RunsService, api_key: str) -> None:
        self.service = service
        self._key = api_key.encode()
        policy = service.policy
        self.keys = IdempotencyKeys(policy.idempotency_retention, policy.max_idempotency_keys)
        self._capabilities = capabilities(policy, service.model)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        method: str = scope["method"]
        path: str = scope["path"]
        try:
            if path == "/health" and method == "GET":
                await answer_json(send, 200, {"status": "ok", "platform": "band-trio"})
                return
            parts = path.strip("/").split("/")
            if parts == ["v1", "capabilities"]:
                self._authenticate(scope)
                if method != "GET":
                    raise HttpError(405, "method_not_allowed", f"{method} is not allowed here")
                await answer_json(send, 200, self._capabilities)
                return
            if parts[:2] != ["v1", "runs"] or len(parts) > 4:
                raise HttpError(404, "not_found", f"no route for {method} {path}")
            self._authenticate(scope)
            body = await self._read_body(scope, receive)
            await self._route(method, parts[2:], scope, body, receive, send)
        except ClientGone:
            return
        except HttpError as exc:
            headers = exc.headers
            if exc.status in (401, 413):  # an unread body must not be parsed as the next request
                headers = (*headers, (b"connection", b"close"))
            await answer(send, exc.status, _error_body(exc), headers)
        except Exception:
            log.exception("%s %s failed", method, path)
            error = HttpError(500, "internal_error", "internal error", kind="server_error")
            await answer(send, 500, _error_body(error))

    def _authenticate(self, scope: dict[str, Any]) -> None:
        """Exactly one `Authorization: Bearer KEY`, compared in constant time. Two
        headers are refused even if one is right: a proxy and the server could
        otherwise disagree about which one was checked."""
        given = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(given) == 1:
            kind, _, token = given[0].partition(b" ")
            if kind.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key):
                return
        raise HttpError(401, "invalid_api_key", "Invalid API key")

    async def _read_body(self, scope: dict[str, Any], receive: Any) -> bytes:
        """The body, or a 413 once it is over the policy's limit (not read further)."""
        limit = self.service.policy.max_body
        try:
            return await read_body(scope, receive, limit)
        except BodyTooLarge:
            raise HttpError(413, "payload_too_large", f"Request body over {limit} bytes") from None

    async def _route(
        self,
        method: str,
        rest: list[str],
        scope: dict[str, Any],
        body: bytes,
        receive: Any,
        send: Any,
    ) -> None:
        allowed = "POST" if not rest or rest[1:] in (["stop"], *_PEOPLE) else "GET"
        if rest and (not rest[0] or rest[1:] not in ([], ["events"], ["stop"], *_PEOPLE)):
            raise HttpError(404, "not_found", f"no route for {method} {scope['path']}")
        if not rest and method == "GET":  # the listing (the start is POST)
            page = list_runs(
                self.service.runs, scope["query_string"], self.service.policy.max_list_page
            )
            await answer_json(send, 200, page)
            return
        if method != allowed:
            raise HttpError(405, "method_not_allowed", f"{method} is not allowed here")
        if not rest:
            await self._start(scope, body, send)
            return
        run = self.service.runs.get(rest[0])
        if run is None:
            raise _not_found(rest[0])
        if rest[1:] == ["stop"]:
            await self._stop(run, scope, body, send)
        elif rest[1:] == ["events"]:
            await self._events(run, scope, receive, send)
        elif rest[1:] == ["approval"]:
            await approve(run, body, send)
        elif rest[1:] == ["steer"]:
            policy = self.service.policy
            limits = (policy.max_guidance_per_run, policy.max_guidance_chars)
            await steer(run, body, limits, send)
        else:
            await answer_json(send, 200, run.status_body())

    async def _start(self, scope: dict[str, Any], body: bytes, send: Any) -> None:
        """Start a run; with an `Idempotency-Key` already used for this request, answer
        with the run it started instead (`_idempotency` says why and how)."""
        key = idempotency_key(scope["headers"])
        try:
            request = parse_run(body)
        except BadRequest as exc:
            raise HttpError(400, "invalid_request", str(exc)) from None
        if key is not None:
            print_ = fingerprint(body)
            original = self.keys.replay(key, print_)  # a 409 if used for another request
            if original is not None:
                replayed = {
                    "run_id": original.id,
                    "status": original.status.value,
                    "replayed": True,
                }
                await answer_json(send, 202, replayed, ((b"idempotency-replayed", b"true"),))
                return
        try:
            run = self.service.start(request)
        except TooManyRuns:
            limit = self.service.policy.max_concurrent_runs
            raise HttpError(
                429,
                "rate_limit_exceeded",
                f"Too many concurrent runs (max {limit})",
                kind="rate_limit_error",
                headers=((b"retry-after", b"1"),),
            ) from None
        except Draining:
            raise HttpError(
                503, "gateway_draining", "The server is shutting down", kind="server_error"
            ) from None
        if key is not None:
            self.keys.remember(key, print_, run)
        await answer_json(send, 202, {"run_id": run.id, "status": "started", "replayed": False})

    async def _stop(self, run: Run, scope: dict[str, Any], body: bytes, send: Any) -> None:
        try:
            reason = parse_stop(body).reason
        except BadRequest as exc:
            raise HttpError(400, "invalid_request", str(exc)) from None
        query = dict(parse_qsl(scope["query_string"].decode("latin-1")))
        wait = query.get("wait", "false").lower()
        if wait not in ("true", "1", "false", "0"):
            raise HttpError(400, "invalid_request", "'wait' must be true or false")
        stopping = await self.service.stop(run, reason, wait=wait in ("true", "1"))
        await answer_json(send, 200, stopping)

    async def _events(self, run: Run, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Stream the run's events after `Last-Event-ID` (all of them without one),
        until its terminal event; then `: stream closed`, the end of the body, and the
        server closes the connection.

        The last send is made once the disconnect watch is over, never under it:
        inside that send hypercorn ends the exchange, tells the app `http.disconnect`
        itself, and then either recycles the connection (restarting its keep-alive
        timer) or closes it. Made under the watch, the watch's cancel cut that step
        in half, and the connection was left with neither a request nor a timer: a
        client that read the stream to its end and held on held one of the server's
        fds for as long as it liked (1,000 of them past 60 s, issue 38).

        The answer says `connection: close` rather than keeping the connection alive
        for a next request: a stream's end is where its client is done (an
        `EventSource` reconnects by itself, with `Last-Event-ID`), so keeping the
        connection would only let every finished reader hold an fd for the
        keep-alive's 5 s. Measured with 1,000 readers at once against a server under
        `ulimit -n 256`: kept alive, its fds sat at the limit for 20 s and `/health`
        timed out; closed, each was let go within 81 ms of its end, and the fds were
        back to 9 within 2 s. A client with more to ask opens a connection."""
        after = _last_event_id(scope)
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        run.subscribe(+1)
        ended = False
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_watch_disconnect, receive, nursery.cancel_scope)
                await self._pump(run, after, send)
                ended = True
                nursery.cancel_scope.cancel()
        finally:
            run.subscribe(-1)
        if ended:
            await send({"type": "http.response.body", "body": _CLOSED})
        elif (
            run.request.on_disconnect == "cancel" and run.subscribers == 0 and not run.events.closed
        ):
            run.stop(DISCONNECT_REASON)

    async def _pump(self, run: Run, after: int, send: Any) -> None:
        """Send the log's frames after `after`, then each new one, until the log is
        closed. The frames are the log's own bytes, shared by every subscriber: a
        send joins at most about a `send_chunk` of them, so a subscriber never holds
        a copy of the whole log."""
        events = run.events
        keepalive = self.service.policy.keepalive
        chunk = self.service.policy.server.send_chunk
        position = after
        while True:
            frames = events.batch(position, chunk)
            if frames:
                position = frames[-1][0]
                body = b"".join(frame for _, frame in frames) if len(frames) > 1 else frames[0][1]
                await send({"type": "http.response.body", "body": body, "more_body": True})
                continue
            if events.closed:
                return
            with trio.move_on_after(keepalive) as idle:
                await events.wait_changed()
            if idle.cancelled_caught:
                await send({"type": "http.response.body", "body": _KEEPALIVE, "more_body": True})


_MAX_EVENT_ID_DIGITS = 18
"""An event id is a count of one run's events: 18 digits is more than any log holds
(and `int()` of a longer string is where Python's digit limit would start)."""


def _last_event_id(scope: dict[str, Any]) -> int:
    """The `Last-Event-ID` to resume after (0 without one); anything but one plain
    decimal id is a 400, never a 500."""
    given = [value for name, value in scope["headers"] if name == b"last-event-id"]
    if not given:
        return 0
    value = given[0].strip()
    if len(given) > 1 or not value.isdigit() or len(value) > _MAX_EVENT_ID_DIGITS:
        raise HttpError(400, "invalid_request", "Last-Event-ID must be one event id")
    return int(value)


async def _watch_disconnect(receive: Any, stream: trio.CancelScope) -> None:
    """End the event stream when the client goes away (hypercorn says so on receive)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stream.cancel(reason=DISCONNECT_REASON)
            return
