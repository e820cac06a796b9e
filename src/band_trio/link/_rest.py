"""The agent REST API over a lean HTTP/1.1 client (`_http_pool`), with one seam for errors.

Every call runs under a deadline from the `Policy` (trio's, not httpx's: the
httpx timeout is only a backstop), retries 408/429/500/502/503/504 under the
rules every client of band-trio follows (`band_trio.retry`: `Retry-After`
honoured up to `rest_retry_cap`, backoff with equal jitter otherwise), and raises
only band-trio errors. Every call goes through `RestClient._call`, the single
seam: it sends, reads the answer up to `Policy.max_response_body` (past it the
connection is dropped), retries, turns an error status into the error its
envelope `code` names, and decodes the answer, with the HTTP client's, httpx2's
and msgspec's exceptions translated by `map_transport_errors`.

The requests go through `_http_pool.HttpPool` (h11 on trio streams: a signal's mark
leaves ~0.5 ms sooner than through httpx2, docs/discussion/dependencies.md);
an httpx2 transport passed as `transport=` (a proxy, a test's mock) is used
through an `httpx2.AsyncClient` instead, behind the same seam; so is a proxy
named by the environment (`HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`, minus
`NO_PROXY`), which httpx2 honours and the lean pool does not speak.
"""

from __future__ import annotations

import logging
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

import httpx2
import msgspec
import trio

from .. import errors
from ..observe import hooks as observe
from ..policy import Policy
from ..retry import (
    PLATFORM_RETRY_STATUSES,
    Fault,
    FaultKind,
    GiveUp,
    Retries,
    equal_jitter,
    retry_after,
)
from ..tls import shared_ssl_context
from ..wire import (
    PAGE_LIMIT_MAX,
    ActivityReport,
    AgentProfile,
    ChatMessage,
    Data,
    EventCreated,
    FailedMark,
    LifecycleResult,
    MentionRef,
    MessagePage,
    NewEvent,
    NewEventBody,
    NewMessage,
    NewMessageBody,
    Participant,
    PostedMessage,
    RoomPage,
    RoomSummary,
    cut_event_content,
)
from ._http_pool import (
    Answer,
    HttpPool,
    HttpProtocolError,
    HttpTooLarge,
    HttpTransportError,
    HttpUnsent,
)
from ._lanes import Lanes
from ._status import Codes, error_for_status

__all__ = [
    "AMBIGUOUS_STATUSES",
    "RestClient",
    "check_rest_url",
    "env_proxy_for",
    "map_transport_errors",
]


def env_proxy_for(url: str) -> bool:
    """Whether the environment routes `url` through a proxy (as httpx2 reads it:
    `<scheme>_proxy` or `all_proxy`, any case, unless `no_proxy` exempts the host)."""
    proxies = urllib.request.getproxies_environment()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")  # no_proxy, as it is set


log = logging.getLogger("band_trio.link.rest")

T = TypeVar("T")
_UNSENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, HttpUnsent)
"""Transport errors raised before a request was sent: safe to retry, whatever it was."""
_POST_CODES: Codes = {"forbidden": errors.ExecutionStoppedError}
"""A post to a room answered 403 `forbidden` met the platform's stopped gate
(docs/reference/platform.md): the only refusal a post gets for a room the agent is in."""
_ROOM_PAGE = 100
UNHANDLED_STATUSES = frozenset({408, 429, 503})
"""The retried statuses that say a request was not handled (timed out unread, refused
for its rate, the service unavailable): a post answered so is sent again as it is. A
500, 502 or 504 may come after the platform (or a gateway before it) did the work, so
a post answered so is not sent again blindly: its caller looks at the room first
(the runtime's reconciled posts)."""
AMBIGUOUS_STATUSES = PLATFORM_RETRY_STATUSES - UNHANDLED_STATUSES
_encoder = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _seg(value: str) -> str:
    """One path segment: an id percent-encoded, so `?`, `#`, `%` and `/` stay inside it."""
    return urllib.parse.quote(value, safe="")


def _room(room_id: str) -> str:
    return f"chats/{_seg(room_id)}"


def _decode(kind: type[T], body: bytes) -> T:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    result: T = decoder.decode(body)
    return result


@contextmanager
def map_transport_errors(what: str) -> Iterator[None]:
    """Translate the HTTP clients', msgspec's and deadline errors into band-trio's tree."""
    try:
        yield
    except HttpTooLarge as exc:
        raise errors.PlatformProtocolError(f"{what}: {exc}") from exc
    except HttpProtocolError as exc:
        raise errors.PlatformProtocolError(f"{what}: unreadable answer: {exc}") from exc
    except HttpUnsent as exc:
        raise errors.PlatformUnavailableError(f"{what}: {exc}", maybe_handled=False) from exc
    except HttpTransportError as exc:
        raise errors.PlatformUnavailableError(f"{what}: {exc}") from exc
    except trio.TooSlowError as exc:
        raise errors.PlatformUnavailableError(f"{what}: no answer before the deadline") from exc
    except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
        unsent = f"{what}: {exc!r}"
        raise errors.PlatformUnavailableError(unsent, maybe_handled=False) from exc
    except httpx2.TimeoutException as exc:
        raise errors.PlatformUnavailableError(f"{what}: timed out ({exc!r})") from exc
    except httpx2.TransportError as exc:
        raise errors.PlatformUnavailableError(f"{what}: {exc!r}") from exc
    except msgspec.DecodeError as exc:
        raise errors.PlatformProtocolError(f"{what}: unreadable response: {exc}") from exc
    except RecursionError as exc:
        raise errors.PlatformProtocolError(f"{what}: response nested too deeply") from exc


def check_rest_url(url: str) -> None:
    """Raise `ConfigurationError` now for a REST base URL no call could reach
    (`http(s)://HOST[:PORT][/PATH]`), rather than a transport error at the first call."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise errors.ConfigurationError(f"not an http(s) REST URL: {url!r}")


class RestClient:
    """One agent's REST session. Use as `async with RestClient(...) as rest:`."""

    def __init__(
        self,
        rest_url: str,
        api_key: str,
        *,
        policy: Policy | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        if not rest_url:
            raise errors.ConfigurationError("rest_url is required")
        check_rest_url(rest_url)
        if not api_key:
            raise errors.ConfigurationError("api_key is required")
        if not (api_key.isprintable() and api_key.isascii()) or api_key != api_key.strip():
            raise errors.ConfigurationError("api_key holds characters a header cannot carry")
        self._policy = policy or Policy()
        self._base = urllib.parse.urlsplit(rest_url.rstrip("/")).path + "/api/v1/agent/"
        headers = {
            "X-API-Key": api_key,
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": "band-trio",
        }
        self._pool: HttpPool | None = None
        self._client: httpx2.AsyncClient | None = None
        self._lanes: Lanes | None = None
        """httpx2's gate: marks first, and never more requests in its pool than it has
        connections (the lean pool is its own gate)."""
        if transport is None and not env_proxy_for(rest_url):
            self._pool = HttpPool(
                rest_url,
                headers,
                connections=self._policy.rest_connections,
                context=shared_ssl_context() if rest_url.startswith("https:") else None,
                close_grace=self._policy.cleanup_grace,
            )
        else:
            self._lanes = Lanes(self._policy.rest_connections)
            self._client = httpx2.AsyncClient(
                base_url=rest_url.rstrip("/") + "/api/v1/agent/",
                headers=headers,
                # A backstop only: trio deadlines from the policy govern every call.
                timeout=httpx2.Timeout(self._policy.request_deadline + self._policy.rest_backstop),
                limits=httpx2.Limits(
                    max_connections=self._policy.rest_connections,
                    max_keepalive_connections=self._policy.rest_connections,
                ),
                transport=transport,
                verify=shared_ssl_context(),  # one per process, not a CA bundle per client
            )

    async def __aenter__(self) -> RestClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()  # bounded by the cleanup grace, shielded
        if self._client is not None:
            with trio.move_on_after(self._policy.cleanup_grace, shield=True):
                await self._client.aclose()

    # -- the seam ----------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        kind: type[T],
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        retry: bool = True,
        deadline: float | None = None,
        codes: Codes | None = None,
        lifecycle: bool = False,
        retry_unsent: bool = True,
        urgent: bool = False,
        on_slot: Callable[[], None] | None = None,
        statuses: frozenset[int] = PLATFORM_RETRY_STATUSES,
    ) -> T | None:
        """Send one request and decode its answer into `kind`: the one path every call
        takes, so transport errors, error envelopes and unreadable bodies are
        translated here and nowhere else.

        408, 429, 500, 502, 503 and 504 are retried as the policy allows (honouring
        `Retry-After`: a longer one than `rest_retry_cap` raises at once), and so is a
        request that never left (the connection could not be made), unless
        `retry_unsent` is False;
        any other error status raises the error its envelope `code` names (`codes`
        first: what a code means on this route). A 204 returns None. A lifecycle
        call (`lifecycle=True`) must answer exactly 200 with `success` not false.
        An `urgent` request (a final mark) takes the next free connection before
        any other waiting one (`Lanes`). `on_slot` is called each time an attempt gets
        its connection (its wait in the lanes is over): a settling starts its grace
        then (`Cutoff.queued`), so the wait costs the mark none of it. `statuses` narrows
        the retried ones (a post retries only `UNHANDLED_STATUSES`).
        """
        content = None if body is None else _encoder.encode(body)
        what = f"{method} {path}"
        policy = self._policy
        retries = Retries(
            attempts=policy.rest_max_retries + 1,
            base=policy.rest_retry_base,
            cap=policy.rest_retry_cap,
            retry_after_cap=policy.rest_retry_cap,
            peer="the platform",
            statuses=statuses,
            backoff=equal_jitter,  # a reply must outlast a platform restart (see equal_jitter)
        )
        with observe.rest_call(method, path) as call, map_transport_errors(what):
            while True:
                try:
                    with trio.fail_after(deadline or policy.request_deadline):
                        response, answer = await self._send(
                            method, path, content, params, urgent, on_slot
                        )
                except _UNSENT as exc:
                    # The request never left: the platform is restarting, or briefly
                    # away. Trying again cannot duplicate anything, even a post.
                    if not (retry and retry_unsent):
                        raise
                    decision = retries.after(Fault(FaultKind.UNSENT, detail=repr(exc)))
                    if isinstance(decision, GiveUp):
                        raise
                    log.info("%s: %r; retry in %.2fs", what, exc, decision.delay)
                    await trio.sleep(decision.delay)
                    continue
                if response.is_success:
                    break
                error = error_for_status(response.status_code, answer, None, codes)
                wait = retry_after(response.headers)
                if wait is not None:
                    error.retry_after = wait
                if not retry:
                    raise error
                fault = Fault(FaultKind.STATUS, status=error.status, retry_after=error.retry_after)
                decision = retries.after(fault)
                if isinstance(decision, GiveUp):
                    log.info("%s: %s", what, decision.reason)
                    raise error
                log.info("%s answered %s; retry in %.2fs", what, error.status, decision.delay)
                await trio.sleep(decision.delay)
            call.set("http.response.status_code", response.status_code)
            if response.status_code == 204:
                return None
            if lifecycle and response.status_code != 200:
                raise errors.PlatformProtocolError(
                    f"{what}: expected 200, got {response.status_code}"
                )
            if not answer:
                raise errors.PlatformProtocolError(
                    f"{what}: status {response.status_code} with an empty body"
                )
            return _decode(kind, answer)

    async def _send(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: dict[str, Any] | None,
        urgent: bool,
        on_slot: Callable[[], None] | None,
    ) -> tuple[Answer | httpx2.Response, bytes]:
        """One request and its answer's body, read up to `Policy.max_response_body`:
        past it `PlatformProtocolError`, and the connection is dropped, not pooled.
        It waits for a slot in the one gate (`Lanes`: the lean pool's own, or the one
        in front of httpx2's pool), which it holds until its answer is read;
        `on_slot` is told as soon as it has one."""
        limit = self._policy.max_response_body
        if self._pool is not None:
            target = self._base + path
            if params:
                target += "?" + urllib.parse.urlencode(params)
            answer = await self._pool.request(
                method, target, content, limit, urgent=urgent, on_slot=on_slot
            )
            return answer, answer.body
        lanes = self._lanes
        assert lanes is not None
        await lanes.acquire(urgent=urgent)
        try:
            if on_slot is not None:
                on_slot()
            return await self._exchange(method, path, content, params, limit)
        finally:
            lanes.release()

    async def _exchange(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: dict[str, Any] | None,
        limit: int,
    ) -> tuple[httpx2.Response, bytes]:
        """One exchange through httpx2 (a proxy, a test's transport)."""
        assert self._client is not None
        async with self._client.stream(method, path, content=content, params=params) as response:
            announced = response.headers.get("content-length", "")
            if announced.isdigit() and int(announced) > limit:
                raise errors.PlatformProtocolError(
                    f"{method} {path}: an answer of {announced} bytes, over the {limit}-byte limit"
                )
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise errors.PlatformProtocolError(
                        f"{method} {path}: the answer ran past the {limit}-byte limit"
                        " (Policy.max_response_body)"
                    )
        return response, bytes(body)

    async def _lifecycle(
        self,
        path: str,
        body: Any = None,
        *,
        urgent: bool = False,
        on_slot: Callable[[], None] | None = None,
    ) -> LifecycleResult | None:
        """A lifecycle call: exactly 200 is success, 204 means the room is stopped."""
        found = await self._call(
            "POST", path, Data[LifecycleResult], body=body, lifecycle=True, urgent=urgent,
            on_slot=on_slot,
        )  # fmt: skip
        if found is None:
            return None
        if not found.data.success:
            raise errors.PlatformProtocolError(f"POST {path}: success=false")
        return found.data

    async def _data(self, method: str, path: str, kind: type[T], **options: Any) -> T:
        """A call whose answer must be `{"data": <kind>}` (a 204 breaks the contract)."""
        found = await self._call(method, path, Data[kind], **options)  # type: ignore[valid-type]
        if found is None:
            raise errors.PlatformProtocolError(f"{method} {path}: 204 where data was due")
        data: T = found.data
        return data

    # -- the agent API -------------------------------------------------------

    async def me(self) -> AgentProfile:
        """The agent's profile: the start-up check of the key and the URL. A platform
        that cannot be reached fails at once here: a wrong URL is not retried."""
        return await self._data("GET", "me", AgentProfile, retry_unsent=False)

    async def rooms(
        self, on_page: Callable[[list[RoomSummary]], None] | None = None
    ) -> list[RoomSummary]:
        """Every room the agent is in, page by page, up to `Policy.max_rooms`.

        The first page says how many there are; the others are then asked for at
        once (as many in flight as the lanes allow), not one after another: at
        10,000 rooms that is 100 round trips in a few waves rather than in a row,
        before the first room can be joined. `on_page` is shown each page's rooms
        as it arrives (the later pages in any order), so the caller can join them
        while the rest are on their way: a platform pages by offset, and the last
        of 100 pages can come seconds after the first. band-sdk stops at 50 pages
        (5,000 rooms) without a word; here the bound is a policy and reaching it
        is logged, naming how many rooms were left out (past it, no page is shown
        early: the caller gets the first `max_rooms` in the list's order)."""
        cap = -(-self._policy.max_rooms // _ROOM_PAGE)
        first = await self._room_page(1)
        total = first.metadata.total_pages
        early = on_page if total is None or total <= cap else None
        if early is not None and first.data:
            early(list(first.data))
        found = list(first.data)
        if first.data and total is not None and total > 1:
            for page in await self._room_pages(range(2, min(total, cap) + 1), early):
                found.extend(page.data)
        if total is not None and total > cap and len(found) >= self._policy.max_rooms:
            log.warning(
                "the agent is in more than %d rooms (Policy.max_rooms): only the first "
                "%d are served; %s in all",
                self._policy.max_rooms,
                self._policy.max_rooms,
                first.metadata.total_count or "more",
            )
        return found[: self._policy.max_rooms]

    async def _room_page(self, page: int) -> RoomPage:
        result = await self._call(
            "GET", "chats", RoomPage, params={"page": page, "page_size": _ROOM_PAGE}
        )
        if result is None:
            raise errors.PlatformProtocolError("GET chats: 204 where a page was due")
        return result

    async def _room_pages(
        self, pages: range, on_page: Callable[[list[RoomSummary]], None] | None
    ) -> list[RoomPage]:
        """These pages of the room list, all in flight at once, in order (each shown
        to `on_page` as it comes); the first error ends the others and is raised."""
        got: dict[int, RoomPage] = {}
        failed: list[errors.PlatformError] = []

        async def one(page: int, nursery: trio.Nursery) -> None:
            try:
                got[page] = found = await self._room_page(page)
                if on_page is not None and found.data:
                    on_page(list(found.data))
            except errors.PlatformError as exc:
                failed.append(exc)
                nursery.cancel_scope.cancel(reason="a page of the room list failed")

        async with trio.open_nursery() as nursery:
            for page in pages:
                nursery.start_soon(one, page, nursery)
        if failed:
            raise failed[0]
        return [got[page] for page in pages]

    async def next_message(self, room_id: str) -> ChatMessage | None:
        """The oldest message not yet processed for this agent, or None (204)."""
        path = f"{_room(room_id)}/messages/next"
        found = await self._call("GET", path, Data[ChatMessage], lifecycle=True)
        return None if found is None else found.data

    async def claim(
        self, room_id: str, message_id: str, *, on_slot: Callable[[], None] | None = None
    ) -> LifecycleResult | None:
        """Mark `processing` (the durable claim). None: the room is stopped (204).
        `on_slot`: called once the request has a connection (see `_call`)."""
        path = f"{_room(room_id)}/messages/{_seg(message_id)}/processing"
        return await self._lifecycle(path, on_slot=on_slot)

    async def mark_processed(
        self, room_id: str, message_id: str, *, on_slot: Callable[[], None] | None = None
    ) -> LifecycleResult | None:
        """The final mark (urgent: it goes before any other waiting request). `on_slot`
        is called once it has a connection: a settling's grace starts there
        (`Cutoff.queued`), not in the queue."""
        return await self._lifecycle(
            f"{_room(room_id)}/messages/{_seg(message_id)}/processed", urgent=True,
            on_slot=on_slot,
        )  # fmt: skip

    async def mark_failed(
        self,
        room_id: str,
        message_id: str,
        label: str,
        *,
        on_slot: Callable[[], None] | None = None,
    ) -> LifecycleResult | None:
        """The final mark of a failed turn (urgent and `on_slot`, as `mark_processed`)."""
        return await self._lifecycle(
            f"{_room(room_id)}/messages/{_seg(message_id)}/failed",
            FailedMark(error=label),
            urgent=True,
            on_slot=on_slot,
        )

    async def report_activity(
        self, room_id: str, working: bool, *, on_slot: Callable[[], None] | None = None
    ) -> bool:
        """Report working on/off once (never retried). Returns the platform's answer:
        False in reply to `working=True` means the platform has stopped the room.
        `on_slot`: called once the request has a connection (see `_call`)."""
        report = await self._data(
            "POST",
            f"{_room(room_id)}/activity",
            ActivityReport,
            body=ActivityReport(working=working),
            retry=False,
            deadline=self._policy.activity_request,
            on_slot=on_slot,
        )
        return report.working

    async def post_message(
        self, room_id: str, content: str, mentions: Sequence[MentionRef]
    ) -> PostedMessage:
        body = NewMessageBody(message=NewMessage(content=content, mentions=list(mentions)))
        return await self._data(
            "POST", f"{_room(room_id)}/messages", PostedMessage, body=body, codes=_POST_CODES,
            statuses=UNHANDLED_STATUSES,
        )  # fmt: skip

    async def post_event(
        self,
        room_id: str,
        content: str,
        message_type: str,
        metadata: dict[str, Any] | None = None,
        *,
        on_slot: Callable[[], None] | None = None,
    ) -> EventCreated:
        # at most EVENT_CONTENT_CHARS, or the platform refuses it: cut, head and tail kept
        event = NewEvent(
            content=cut_event_content(content), message_type=message_type, metadata=metadata
        )
        body = NewEventBody(event=event)
        return await self._data(
            "POST", f"{_room(room_id)}/events", EventCreated, body=body, codes=_POST_CODES,
            on_slot=on_slot, statuses=UNHANDLED_STATUSES,
        )  # fmt: skip

    async def unprocessed(self, room_id: str, cursor: str | None = None) -> MessagePage:
        """One page of the messages not yet processed for this agent, oldest first."""
        params: dict[str, Any] = {"sort_order": "asc", "limit": 100}
        if cursor is not None:
            params["cursor"] = cursor
        page = await self._call("GET", f"{_room(room_id)}/messages", MessagePage, params=params)
        if page is None:
            raise errors.PlatformProtocolError("GET messages: 204 where a page was due")
        return page

    async def participants(self, room_id: str) -> list[Participant]:
        return await self._data("GET", f"{_room(room_id)}/participants", list[Participant])

    async def context(
        self, room_id: str, cursor: str | None = None, limit: int | None = None
    ) -> MessagePage:
        """One page of what the agent sent or was sent in the room, oldest first
        (`GET .../context`): the first page without a cursor, 50 by default."""
        params: dict[str, Any] = {}
        if cursor is not None:
            params["cursor"] = cursor
        if limit is not None:
            params["limit"] = limit
        path = f"{_room(room_id)}/context"
        page = await self._call("GET", path, MessagePage, params=params or None)
        if page is None:
            raise errors.PlatformProtocolError("GET context: 204 where a page was due")
        return page

    async def history(self, room_id: str) -> list[ChatMessage]:
        """The room's newest `Policy.history_messages` context messages, oldest first.

        The platform serves context oldest first (band-client-rest 0.0.51), so its
        first page of a long room is the oldest; the cursor is walked to the end,
        up to `Policy.history_pages` pages, keeping the newest."""
        policy = self._policy
        kept: deque[ChatMessage] = deque(maxlen=policy.history_messages)
        cursor: str | None = None
        for _ in range(policy.history_pages):
            page = await self.context(room_id, cursor, PAGE_LIMIT_MAX)
            kept.extend(page.data)
            cursor = page.metadata.next_cursor
            if not page.metadata.has_more or cursor is None:
                return list(kept)
        log.warning(
            "room %s: the history is longer than %d pages (Policy.history_pages): "
            "the newest messages past them are left out",
            room_id,
            policy.history_pages,
        )
        return list(kept)
