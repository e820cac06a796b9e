"""The raw ASGI app: dispatch, authentication, the request log, error envelopes.

Hand-written rather than a framework because it sits inside every latency the
benchmarks report: a request costs one path split, one `match`, one dict
lookup for the key and one msgspec encode. Any exception a route raises that
is not an `HttpError` is logged and answered 500; the server never goes down
on client input.
"""

from __future__ import annotations

from functools import partial
from time import perf_counter
from typing import Any
from urllib.parse import parse_qsl

from ..server import BodyTooLarge, ClientGone, HttpError, abort_connection, answer, read_body
from ._admin import admin_route, handle_admin
from ._api import PREFIX, describe, handle, route
from ._console import PREFIX as CONSOLE
from ._console import Console
from ._faults import Intercepted
from ._log import logger
from ._platform import Platform
from ._responses import Response, error_body
from ._socket import serve_socket

__all__ = ["App"]


class App:
    """ASGI 3 application serving the agent API, the admin API and the websocket."""

    def __init__(self, platform: Platform, console: Console | None = None) -> None:
        self.platform = platform
        self.console = console
        """The browser console under `/_console/`, when the server was asked for it."""
        self._requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "http":
            path: str = scope["path"]
            if self.console is not None and (path == CONSOLE or path.startswith(CONSOLE + "/")):
                await self.console.serve(scope, receive, send)
                return
            await self._http(scope, receive, send)
        elif kind == "websocket":
            await serve_socket(self.platform, scope, receive, send)

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        t = perf_counter()
        body: bytes | None
        try:
            body = await read_body(scope, receive, self.platform.policy.max_request_body)
        except BodyTooLarge:
            body = None
        except ClientGone:
            return
        method: str = scope["method"]
        path: str = scope["path"]
        query = scope["query_string"].decode("latin-1") or None  # as sent, percent-encoded
        self._requests += 1
        request_id = f"req-{self._requests}"
        agent_id: str | None = None
        p = self.platform
        p.request_log.count("requests")
        try:
            if body is None:
                p.request_log.count("bodies_too_large")
                limit = p.policy.max_request_body
                raise HttpError(413, "payload_too_large", f"request body over {limit} bytes")
            result, agent_id = self._dispatch(scope, method, path, body)
            if isinstance(result, Intercepted):  # an armed fault caught this request
                faulted = await p.faults.run_rest(
                    result,
                    method=method,
                    path=path,
                    query=query,
                    agent_id=agent_id,
                    request_id=request_id,
                )
                if faulted is None:  # handled, and dropped: no answer, the connection cut
                    abort_connection()
                    return
                result = faulted
            response = result
        except HttpError as exc:
            response = Response(
                exc.status, error_body(exc.code, exc.message, request_id, exc.details)
            )
        except Exception:
            p.request_log.count("errors")
            logger.exception("%s %s failed", method, path)
            message = "internal error"
            response = Response(500, error_body("internal_error", message, request_id))
        p.request_log.append(
            "rest",
            t,
            agent_id=agent_id,
            method=method,
            path=path,
            query=query,
            status=response.status,
            body=body.decode("utf-8", "replace") if body else None,
        )
        if response.status == 413:  # the unread rest of the body must not be parsed next
            response = Response(413, response.body, (*response.headers, (b"connection", b"close")))
        await answer(send, response.status, response.body, response.headers)

    def _dispatch(
        self, scope: dict[str, Any], method: str, path: str, body: bytes
    ) -> tuple[Response | Intercepted, str | None]:
        p = self.platform
        parts = path.strip("/").split("/")
        query_string: bytes = scope["query_string"]
        query = dict(parse_qsl(query_string.decode("latin-1"))) if query_string else {}
        if parts[:3] == list(PREFIX):
            found = route(method, parts[3:])
            if found is not None:
                agent = None
                for name, value in scope["headers"]:
                    if name == b"x-api-key":
                        agent = p.store.agents_by_key.get(value.decode("latin-1"))
                        break
                if agent is None:
                    raise HttpError(401, "unauthorized", "missing or invalid X-API-Key")
                if p.faults.rest:
                    name, room_id, message_id = describe(found)
                    fault = p.faults.take_rest(name, room_id, message_id, agent.id)
                    if fault is not None:
                        run = partial(handle, p, found, agent, query, body)
                        return Intercepted(fault, name, run), agent.id
                return handle(p, found, agent, query, body), agent.id
        elif parts[0] == "_admin":
            admin = admin_route(method, parts[1:])
            if admin is not None:
                return handle_admin(p, admin, query, body), None
        p.request_log.count("unhandled_routes")
        p.request_log.append(
            "note", perf_counter(), method=method, path=path,
            query=query_string.decode("latin-1") or None, body="unhandled_route",
        )  # fmt: skip
        raise HttpError(404, "not_found", f"no route for {method} {path}")
