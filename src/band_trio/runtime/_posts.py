"""A unit's posts to its room, each landing once even when the platform dies mid-post.

The platform's message API has no idempotency key. A post whose connection broke
after it was sent, or that had no answer by its deadline, or that was answered 500,
502 or 504, may or may not have been stored: sending it again could answer twice,
giving up could lose the answer. So such a post is *reconciled*: once the platform
answers again, the room's own posts are listed (`GET .../context`, which holds every
message the agent sent, of any type) and the post is matched among them:

* by sender (this agent), type and content, in posting order;
* only among posts after the unit's message was created (`since`), and not already
  known to this process (`OwnPosts`: the ids every earlier post of the room's units
  got, answered or matched), so an earlier identical answer is not taken for it;
* the first such post matches. Found: its id is the post's. Not found: it was never
  stored, and is sent again. Never both.

The one blind spot: two posts of identical type and content in one unit, the first of
them broken and unmatched, and a later copy stored by a process this one knows
nothing of (an earlier run of the agent answered the same message the same way after
it was created). docs/discussion/closing.md says so too.

A post that never left (no connection could be made: `maybe_handled` False) or was
refused unhandled (408, 429, 503: retried by the REST client first) is simply sent
again. The whole post waits for the platform through outages and reconnects under
`Policy.post_wait`, inside the unit's own deadline; past it the post fails with
`PlatformUnavailableError`.

The listing that decides is sent only after the platform has answered a request
since the break (a first, one-message page): a platform frozen mid-post handles the
request it held from before the freeze in the same moment it wakes up, before a
request sent after that answer can reach it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

import trio

from .. import errors
from ..link import AMBIGUOUS_STATUSES, RestClient
from ..policy import Policy
from ..retry import PLATFORM_RETRY_STATUSES, equal_jitter
from ..wire import PAGE_LIMIT_MAX, ChatMessage
from ._ledger import OwnPosts
from ._pages import Pages

__all__ = ["Post", "post_once", "read_through"]

T = TypeVar("T")

log = logging.getLogger("band_trio.runtime.posts")


class Post:
    """What one post is, to find it among the room's messages."""

    __slots__ = ("content", "message_type")

    def __init__(self, message_type: str, content: str) -> None:
        self.message_type = message_type
        self.content = content
        """As the platform stores it (an event's already cut to the platform's cap)."""


def _when(stamp: str | None) -> datetime | None:
    """A platform timestamp (ISO 8601, UTC where it names no zone); None if unreadable."""
    if stamp is None:
        return None
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _ambiguous(exc: errors.PlatformError) -> bool:
    """Whether `exc` leaves it open that the platform stored the post."""
    if isinstance(exc, errors.PlatformUnavailableError):
        return exc.maybe_handled
    return isinstance(exc, errors.PlatformResponseError) and exc.status in AMBIGUOUS_STATUSES


def _transient(exc: errors.PlatformError) -> bool:
    """Whether waiting may help: the platform is away, or answered a retryable status."""
    if isinstance(exc, errors.PlatformUnavailableError):
        return True
    return isinstance(exc, errors.PlatformResponseError) and exc.status in PLATFORM_RETRY_STATUSES


async def post_once(
    rest: RestClient,
    policy: Policy,
    *,
    room_id: str,
    agent_id: str,
    post: Post,
    send: Callable[[], Awaitable[str]],
    since: str | None,
    known: OwnPosts,
) -> str:
    """Send `post` (`send()` returns its id) so that it is stored exactly once; its id.

    Raises what `send` raises for an answer that is final (a 4xx: the stopped gate,
    a validation error), and `PlatformUnavailableError` once `Policy.post_wait` has
    passed with the platform away."""
    waits = 0
    with trio.move_on_after(policy.post_wait) as bounded:
        while True:
            try:
                post_id = await send()
            except errors.PlatformError as exc:
                if not _transient(exc):
                    raise
                if _ambiguous(exc):
                    log.info(
                        "room %s: a %s post may or may not have landed (%s); looking at the "
                        "room", room_id, post.message_type, exc,
                    )  # fmt: skip
                    search = _Search(rest, policy, room_id, agent_id, post, _when(since), known)
                    found = await search.find()
                    if found is not None:
                        log.info("room %s: the post landed as %s", room_id, found)
                        known.add(found)
                        return found
                    log.info("room %s: the post did not land; sending it again", room_id)
                # not handled, or the platform is away: again after a while (a platform
                # answering 500 at once is not hammered for the whole wait)
                waits += 1
                await trio.sleep(_backoff(policy, waits))
                continue
            known.add(post_id)
            return post_id
    assert bounded.cancelled_caught
    raise errors.PlatformUnavailableError(
        f"room {room_id}: a {post.message_type} post was not confirmed within "
        f"{policy.post_wait:g}s (Policy.post_wait): the platform stayed away or kept failing"
    )


async def read_through(policy: Policy, room_id: str, read: Callable[[], Awaitable[T]]) -> T:
    """`read()` (a GET: the room's history, its participants), tried again while the
    platform is away or its answer was lost, as a post waits for it: under
    `Policy.post_wait`, then `PlatformUnavailableError`. A read changes nothing, so
    trying it again needs no look at the room first."""
    waits = 0
    with trio.move_on_after(policy.post_wait):
        while True:
            try:
                return await read()
            except errors.PlatformError as exc:
                if not _transient(exc):
                    raise
                log.info("room %s: a read failed (%s); trying again", room_id, exc)
            waits += 1
            await trio.sleep(_backoff(policy, waits))
    raise errors.PlatformUnavailableError(
        f"room {room_id}: a read was not answered within {policy.post_wait:g}s "
        "(Policy.post_wait): the platform stayed away"
    )


def _backoff(policy: Policy, n: int) -> float:
    return equal_jitter(n, policy.rest_retry_base, policy.post_retry_cap)


class _Search:
    """Where one post that broke is looked for: the room's posts of this agent of its
    type and content, after `after` (when the unit's message was created), not `known`."""

    __slots__ = ("_after", "_agent_id", "_known", "_policy", "_post", "_rest", "_room_id")

    def __init__(
        self,
        rest: RestClient,
        policy: Policy,
        room_id: str,
        agent_id: str,
        post: Post,
        after: datetime | None,
        known: OwnPosts,
    ) -> None:
        self._rest, self._policy = rest, policy
        self._room_id, self._agent_id = room_id, agent_id
        self._post, self._after, self._known = post, after, known

    async def find(self) -> str | None:
        """The id the post was stored under, or None if it was not; waits (with
        backoff) until the platform answers twice in a row: a first page, then the
        walk."""
        probed = False
        waits = 0
        while True:
            try:
                if not probed:
                    await self._rest.context(self._room_id, None, 1)
                    probed = True
                return await self._walk()
            except errors.PlatformError as exc:
                if not _transient(exc):
                    raise
                log.info("room %s: cannot look at the room yet (%s)", self._room_id, exc)
            waits += 1
            await trio.sleep(_backoff(self._policy, waits))

    async def _walk(self) -> str | None:
        """The room's context, oldest first, to the first post of ours that is it."""
        what = f"room {self._room_id}: the walk for a post that broke"
        pages = Pages(self._policy.scan_pages, what)
        while pages.more:
            page = await self._rest.context(self._room_id, pages.cursor, PAGE_LIMIT_MAX)
            for item in page.data:
                if self._is(item) and item.id not in self._known:
                    return item.id
            pages.advance(page.metadata)
        return None

    def _is(self, item: ChatMessage) -> bool:
        post = self._post
        if not (item.sender_id == self._agent_id and item.sender_type == "Agent"):
            return False
        if item.message_type != post.message_type or item.content != post.content:
            return False
        if self._after is None:
            return True
        stamp = _when(item.inserted_at)
        return stamp is None or stamp >= self._after
