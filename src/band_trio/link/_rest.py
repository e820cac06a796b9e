"""The agent REST API over httpx2, with one seam for transport errors.

Every call runs under a deadline from the `Policy` (trio's, not httpx's: the
httpx timeout is only a backstop), retries 429/408/5xx as band-sdk does while
honouring `Retry-After`, and raises only band-trio errors: httpx2 and msgspec
exceptions are translated in `map_transport_errors`, the single seam.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

import httpx2
import msgspec
import trio

from .. import errors
from ..policy import Policy
from ..wire import (
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
)
from ._status import error_for_status

__all__ = ["RestClient", "map_transport_errors"]

log = logging.getLogger("band_trio.link.rest")

T = TypeVar("T")
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_MAX_ROOM_PAGES = 50
_encoder = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decode(kind: type[T], body: bytes) -> T:
    decoder = _decoders.get(kind)
    if decoder is None:
        decoder = _decoders[kind] = msgspec.json.Decoder(kind)
    result: T = decoder.decode(body)
    return result


@contextmanager
def map_transport_errors(what: str) -> Iterator[None]:
    """Translate httpx2, msgspec and deadline errors into band-trio's tree."""
    try:
        yield
    except trio.TooSlowError as exc:
        raise errors.PlatformUnavailableError(f"{what}: no answer before the deadline") from exc
    except httpx2.TimeoutException as exc:
        raise errors.PlatformUnavailableError(f"{what}: timed out ({exc!r})") from exc
    except httpx2.TransportError as exc:
        raise errors.PlatformUnavailableError(f"{what}: {exc!r}") from exc
    except msgspec.DecodeError as exc:
        raise errors.PlatformProtocolError(f"{what}: unreadable response: {exc}") from exc


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
        if not api_key:
            raise errors.ConfigurationError("api_key is required")
        self._policy = policy or Policy()
        self._client = httpx2.AsyncClient(
            base_url=rest_url.rstrip("/") + "/api/v1/agent/",
            headers={"X-API-Key": api_key, "content-type": "application/json"},
            # A backstop only: trio deadlines from the policy govern every call.
            timeout=httpx2.Timeout(self._policy.request_deadline + 5.0),
            transport=transport,
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
        with trio.move_on_after(self._policy.cleanup_grace, shield=True):
            await self._client.aclose()

    # -- the seam ----------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, Any] | None = None,
        retry: bool = True,
        deadline: float | None = None,
    ) -> httpx2.Response:
        """Send one request (retrying as the policy allows) and return a 2xx response."""
        content = None if body is None else _encoder.encode(body)
        what = f"{method} {path}"
        attempt = 0
        while True:
            with (
                map_transport_errors(what),
                trio.fail_after(deadline or self._policy.request_deadline),
            ):
                response = await self._client.request(method, path, content=content, params=params)
            if response.is_success:
                return response
            error = error_for_status(
                response.status_code, response.content, response.headers.get("retry-after")
            )
            if not retry or response.status_code not in _RETRY_STATUSES:
                raise error
            if attempt >= self._policy.rest_max_retries:
                raise error
            delay = error.retry_after
            if delay is None:
                delay = self._policy.rest_retry_base * 2**attempt * random.uniform(0.9, 1.1)
            delay = min(delay, self._policy.rest_retry_cap)
            log.info("%s answered %s; retry %d in %.2fs", what, error.status, attempt + 1, delay)
            attempt += 1
            await trio.sleep(delay)

    async def _lifecycle(self, path: str, body: Any = None) -> LifecycleResult | None:
        """A lifecycle call: exactly 200 is success, 204 means the room is stopped."""
        response = await self._send("POST", path, body=body)
        if response.status_code == 204:
            return None
        if response.status_code != 200:
            status = response.status_code
            raise errors.PlatformProtocolError(f"POST {path}: expected 200, got {status}")
        with map_transport_errors(f"POST {path}"):
            result = _decode(Data[LifecycleResult], response.content).data
        if not result.success:
            raise errors.PlatformProtocolError(f"POST {path}: success=false")
        return result

    # -- the agent API -------------------------------------------------------

    async def me(self) -> AgentProfile:
        response = await self._send("GET", "me")
        with map_transport_errors("GET me"):
            return _decode(Data[AgentProfile], response.content).data

    async def rooms(self) -> list[RoomSummary]:
        """Every room the agent is in, page by page (at most 50 pages of 100)."""
        found: list[RoomSummary] = []
        for page in range(1, _MAX_ROOM_PAGES + 1):
            response = await self._send("GET", "chats", params={"page": page, "page_size": 100})
            with map_transport_errors("GET chats"):
                result = _decode(RoomPage, response.content)
            found.extend(result.data)
            total = result.metadata.total_pages
            if not result.data or total is None or page >= total:
                break
        return found

    async def next_message(self, room_id: str) -> ChatMessage | None:
        """The oldest message not yet processed for this agent, or None (204)."""
        path = f"chats/{room_id}/messages/next"
        response = await self._send("GET", path)
        if response.status_code == 204:
            return None
        if response.status_code != 200 or not response.content:
            raise errors.PlatformProtocolError(f"GET {path}: status {response.status_code}")
        with map_transport_errors(f"GET {path}"):
            return _decode(Data[ChatMessage], response.content).data

    async def claim(self, room_id: str, message_id: str) -> LifecycleResult | None:
        """Mark `processing` (the durable claim). None: the room is stopped (204)."""
        return await self._lifecycle(f"chats/{room_id}/messages/{message_id}/processing")

    async def mark_processed(self, room_id: str, message_id: str) -> LifecycleResult | None:
        return await self._lifecycle(f"chats/{room_id}/messages/{message_id}/processed")

    async def mark_failed(
        self, room_id: str, message_id: str, label: str
    ) -> LifecycleResult | None:
        return await self._lifecycle(
            f"chats/{room_id}/messages/{message_id}/failed", FailedMark(error=label)
        )

    async def report_activity(self, room_id: str, working: bool) -> bool:
        """Report working on/off once (never retried). Returns the platform's answer:
        False in reply to `working=True` means the platform has stopped the room."""
        response = await self._send(
            "POST",
            f"chats/{room_id}/activity",
            body=ActivityReport(working=working),
            retry=False,
            deadline=self._policy.activity_request,
        )
        with map_transport_errors("POST activity"):
            return _decode(Data[ActivityReport], response.content).data.working

    async def post_message(
        self, room_id: str, content: str, mentions: Sequence[MentionRef]
    ) -> PostedMessage:
        body = NewMessageBody(message=NewMessage(content=content, mentions=list(mentions)))
        response = await self._send("POST", f"chats/{room_id}/messages", body=body)
        with map_transport_errors("POST messages"):
            return _decode(Data[PostedMessage], response.content).data

    async def post_event(
        self,
        room_id: str,
        content: str,
        message_type: str,
        metadata: dict[str, Any] | None = None,
    ) -> EventCreated:
        body = NewEventBody(
            event=NewEvent(content=content, message_type=message_type, metadata=metadata)
        )
        response = await self._send("POST", f"chats/{room_id}/events", body=body)
        with map_transport_errors("POST events"):
            return _decode(Data[EventCreated], response.content).data

    async def unprocessed(self, room_id: str, cursor: str | None = None) -> MessagePage:
        """One page of the messages not yet processed for this agent, oldest first."""
        params: dict[str, Any] = {"sort_order": "asc", "limit": 100}
        if cursor is not None:
            params["cursor"] = cursor
        response = await self._send("GET", f"chats/{room_id}/messages", params=params)
        with map_transport_errors("GET messages"):
            return _decode(MessagePage, response.content)

    async def participants(self, room_id: str) -> list[Participant]:
        response = await self._send("GET", f"chats/{room_id}/participants")
        with map_transport_errors("GET participants"):
            return _decode(Data[list[Participant]], response.content).data
