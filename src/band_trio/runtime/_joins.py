"""A connection's room joins, sent from one task and answered on the socket's reader.

An agent in 10,000 rooms used to start 10,000 tasks at each connect, each sending
its room's two joins and parking on a reply event under a deadline scope of its
own: at start-up that was a fifth of the agent's CPU (docs/benchmarks.md, "The
start-up"). Here one task per connection (`Joiner.run`) puts every join on the
wire, the reader hands each reply to `Joiner` synchronously (`Socket.expect`), and
the task wakes only when there is something to send, a reply overdue or a retry
due. The rules are the ones each room's task kept:

* `chat_room` then `room_participants`, never both at once; a `room_participants`
  join that fails leaves the `chat_room` topic again;
* at most `Policy.join_window` rooms joining at once, in the order they came; a
  room holds its place for its two joins, not for the wait before a retry;
* each join answered within `Policy.join_deadline` of being written, or of the
  connection's last join reply if that came later (the platform answers in order:
  while it answers, the joins behind wait their turn), or it failed;
* a failed join is retried for that room alone after `join_retry_base`, doubling
  up to `join_retry_cap`; a room refused more than `join_refusals` times is given
  up (it leaves the agent, with a log line), the connection and the others untouched;
* a room left while its join was in flight leaves its topics again, unless it was
  added again meanwhile (the newer join owns the topics then).

The joiner lives and dies with its connection (the link runs it in the
connection's work nursery): a closed socket ends every join in flight, and the
next connection joins afresh.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable
from math import inf

import trio

from .. import errors
from ..link import Socket
from ..policy import Policy
from ..wire import Reply
from ._hosting import LinkedRoom, LinkedRooms
from ._leaving import chat_topic, participants_topic

__all__ = ["Joiner"]

log = logging.getLogger("band_trio.runtime.link")


class _Join:
    """One room's join on one connection, from its first frame to joined or given up."""

    __slots__ = ("delay", "ref", "refusals", "room", "step")

    def __init__(self, room: LinkedRoom, delay: float) -> None:
        self.room = room
        self.step = 0
        """0: its `chat_room` join is due or in flight; 1: its `room_participants` join."""
        self.ref: str | None = None
        """The ref of the join in flight, None while none is."""
        self.refusals = 0
        self.delay = delay


class Joiner:
    """Every room join of one connection. `add` from anywhere (synchronous); the link
    runs `run` in the connection's work nursery and awaits `wait_done` at set-up."""

    def __init__(
        self,
        socket: Socket,
        *,
        rooms: LinkedRooms,
        policy: Policy,
        on_joined: Callable[[LinkedRoom], None],
    ) -> None:
        self._socket = socket
        self._rooms = rooms
        self._policy = policy
        self._on_joined = on_joined
        self._known: dict[str, LinkedRoom] = {}
        """Per room id, the room joined or joining on this connection: the same room
        added twice is joined once; a room left and added again is a new room."""
        self._waiting: deque[_Join] = deque()
        """Rooms waiting for a place in the window, first come first served."""
        self._placed = 0
        """Rooms holding a place: a join of theirs queued, in flight, or answered and
        the next one queued."""
        self._frames: list[str] = []
        """Frames to send on the task's next round, in order."""
        self._sent: list[tuple[str, _Join]] = []
        """(ref, join) of the joins among `_frames`: each one's deadline counts from
        the moment its batch is written, not from when it was queued (a platform that
        pushes back holds the write, and the frame has not reached it meanwhile)."""
        self._overdue: deque[tuple[float, str, _Join]] = deque()
        """(deadline, ref, join) of every join written, in the order written, so
        deadlines ascend; an entry whose join has moved on (another ref) is skipped."""
        self._retries: list[tuple[float, int, _Join]] = []
        """(when, tie-breaker, join): a heap of the rooms waiting to try again."""
        self._order = itertools.count()
        self._answered_at = -inf
        """When the platform last answered one of these joins: a join is overdue only
        once `join_deadline` has passed since it was written *and* since then. A
        platform works through a burst of joins in order; while it still answers,
        the joins behind are waiting their turn, not lost (an agent and a loaded
        platform in one process took over 10 s to answer 2,048 rooms' joins written
        at once, and timed out hundreds that it answered a moment later)."""
        self._wake = trio.Event()
        self._done = trio.Event()
        self._done.set()

    # -- from anywhere (the set-up, the reader's `room_added`) ------------------

    def add(self, room: LinkedRoom) -> None:
        """Join `room`'s topics on this connection, once."""
        if self._known.get(room.id) is room:
            return
        self._known[room.id] = room
        self._waiting.append(_Join(room, self._policy.join_retry_base))
        self._changed()

    async def wait_done(self) -> None:
        """Return once no room is waiting, joining or due to retry."""
        while not self._done.is_set():
            await self._done.wait()

    # -- the task ---------------------------------------------------------------

    async def run(self) -> None:
        """Send what is due, expire what is overdue, wake for the next of either."""
        while True:
            now = trio.current_time()
            self._expire(now)
            self._release_retries(now)
            self._place()
            self._changed()
            if self._frames:
                frames, self._frames = self._frames, []
                sent, self._sent = self._sent, []
                try:
                    await self._socket.send_many(frames)
                except errors.ConnectionClosedError:
                    # The connection is ending: its close (seen by the link as a close,
                    # not as a failed set-up) ends this task with the rest of its work.
                    await self._socket.closed.wait()
                    return
                deadline = trio.current_time() + self._policy.join_deadline
                self._overdue.extend((deadline, ref, join) for ref, join in sent)
                continue
            self._wake = trio.Event()
            with trio.move_on_at(self._next_due()):
                await self._wake.wait()

    def _next_due(self) -> float:
        due = inf
        while self._overdue and self._overdue[0][2].ref != self._overdue[0][1]:
            self._overdue.popleft()  # answered: no longer due
        if self._overdue:
            due = max(self._overdue[0][0], self._answered_at + self._policy.join_deadline)
        if self._retries:
            due = min(due, self._retries[0][0])
        return due

    def _place(self) -> None:
        window = self._policy.join_window
        while self._waiting and self._placed < window:
            join = self._waiting.popleft()
            self._placed += 1
            self._send(join, chat_topic(join.room.id))

    def _send(self, join: _Join, topic: str) -> None:
        ref, text = self._socket.channels.join_frame(topic)
        join.ref = ref
        self._socket.expect(topic, ref, lambda reply: self._answered(join, ref, topic, reply))
        self._frames.append(text)
        self._sent.append((ref, join))

    def _leave(self, topic: str) -> None:
        """Queue a `phx_leave` for `topic` if joined; its reply is not awaited."""
        frame = self._socket.channels.leave_frame(topic)
        if frame is not None:
            self._frames.append(frame[1])

    def _expire(self, now: float) -> None:
        if now < self._answered_at + self._policy.join_deadline:
            return  # the platform is still answering: the joins behind wait their turn
        while self._overdue and self._overdue[0][0] <= now:
            _, ref, join = self._overdue.popleft()
            if join.ref != ref:
                continue  # answered in time
            self._socket.forget(ref)
            join.ref = None
            if self._superseded(join):
                self._placed -= 1
                continue
            topic = participants_topic(join.room.id) if join.step else chat_topic(join.room.id)
            if join.step == 1:
                self._leave(chat_topic(join.room.id))
            late = f"no reply within {self._policy.join_deadline}s"
            self._failed(join, topic, late, refused=False)

    def _release_retries(self, now: float) -> None:
        while self._retries and self._retries[0][0] <= now:
            _, _, join = heapq.heappop(self._retries)
            join.step = 0
            self._waiting.append(join)

    # -- replies (called by the socket's reader: never awaits) ------------------

    def _answered(self, join: _Join, ref: str, topic: str, reply: Reply) -> None:
        if join.ref != ref:
            return
        join.ref = None
        self._answered_at = trio.current_time()
        if self._superseded(join):
            self._placed -= 1
        elif reply.status != "ok":
            if join.step == 1:
                self._leave(chat_topic(join.room.id))
            reason = reply.response.get("reason")
            why = reason if isinstance(reason, str) else "invalid topic"
            self._failed(join, topic, why, refused=True)
        else:
            self._socket.channels.joined(topic, ref)
            if join.step == 0:
                join.step = 1
                self._send(join, participants_topic(join.room.id))
            else:
                self._joined(join)
        self._changed()

    def _joined(self, join: _Join) -> None:
        self._placed -= 1
        room = join.room
        if self._rooms.get(room.id) is room:
            self._on_joined(room)
        else:  # left while the join was in flight
            self._leave(chat_topic(room.id))
            self._leave(participants_topic(room.id))

    def _failed(self, join: _Join, topic: str, reason: str, *, refused: bool) -> None:
        self._placed -= 1
        room = join.room
        join.refusals += refused
        if join.refusals > self._policy.join_refusals:
            log.warning(
                "room %s: join refused %d times (%s); giving up on the room",
                room.id,
                join.refusals,
                reason,
            )
            if self._rooms.get(room.id) is room:
                self._rooms.remove(room.id, "its join was refused")
            return
        if self._rooms.get(room.id) is not room:
            return  # left meanwhile: nothing to retry
        failure = errors.JoinError(topic, reason, refused=refused)
        log.warning("room %s: %s; retrying in %.1fs", room.id, failure, join.delay)
        when = trio.current_time() + join.delay
        join.delay = min(join.delay * 2, self._policy.join_retry_cap)
        heapq.heappush(self._retries, (when, next(self._order), join))

    def _superseded(self, join: _Join) -> bool:
        """The room was left and added again while this join was in flight: the newer
        room's join owns the topics now (same names), so this one touches nothing —
        no channel record, no leave, no retry — it only gives its place back."""
        return self._known.get(join.room.id) is not join.room

    def _changed(self) -> None:
        """Wake the task, and keep `wait_done`'s event in step with the work left."""
        self._wake.set()
        busy = bool(self._waiting or self._placed or self._retries)
        if busy and self._done.is_set():
            self._done = trio.Event()
        elif not busy:
            self._done.set()
