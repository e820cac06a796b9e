"""The connection's joiner (`runtime._joins.Joiner`) alone, against a scripted socket.

The real-socket tests (test_join_window, test_agent_lifecycle, test_connection)
hold the joiner against the embedded platform; these hold the rules a platform
seldom shows: a join never answered, a `room_participants` refusal, the window
under replies that come in any order, a room left mid-join. Time is trio's
autojump clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import trio

from band_trio import Policy, errors
from band_trio.runtime._joins import Joiner
from band_trio.wire import Channels, Frame, RefCounter, Reply

POLICY = Policy(join_deadline=5.0, join_retry_base=1.0, join_retry_cap=4.0, join_refusals=2)


class _Room:
    def __init__(self, room_id: str) -> None:
        self.id = room_id
        self.joined_on: list[object] = []

    def joined(self, socket: object) -> None:
        self.joined_on.append(socket)

    def push(self, item: object) -> None: ...
    def interrupt(self, reason: str | None) -> bool:
        return False

    def stop(self, reason: str | None) -> None: ...
    def play(self) -> None: ...


class _Rooms:
    def __init__(self, *ids: str) -> None:
        self.current: dict[str, _Room] = {i: _Room(i) for i in ids}
        self.removed: list[str] = []

    def get(self, room_id: str) -> _Room | None:
        return self.current.get(room_id)

    def add(self, room_id: str) -> _Room | None:
        return None

    def remove(self, room_id: str, why: str) -> None:
        self.removed.append(room_id)
        self.current.pop(room_id, None)

    def reconcile(self, wanted: object) -> None: ...


class _Socket:
    """What the joiner uses of `link.Socket`: its channels, `expect`, `forget`, `send_many`."""

    def __init__(self) -> None:
        self.channels = Channels(RefCounter())
        self.sent: list[tuple[str, str, str]] = []  # (event, topic, ref)
        self.writes = 0
        self.handlers: dict[str, tuple[str, Callable[[Reply], None]]] = {}
        self.seen = 0
        self._wrote = trio.Event()
        self.closed = trio.Event()
        self.broken = False

    def expect(self, topic: str, ref: str, handler: Callable[[Reply], None]) -> None:
        self.handlers[ref] = (topic, handler)

    def forget(self, ref: str) -> None:
        self.handlers.pop(ref, None)

    async def send_many(self, texts: list[str]) -> None:
        if self.broken:
            raise errors.ConnectionClosedError("the websocket is closed")
        self.writes += 1
        for text in texts:
            _, ref, topic, event, _ = json.loads(text)
            self.sent.append((event, topic, ref))
        self._wrote.set()
        self._wrote = trio.Event()
        await trio.lowlevel.checkpoint()

    def open_joins(self) -> list[tuple[str, str]]:
        """(topic, ref) of every join on the wire awaiting its reply, oldest first (one
        the joiner expects but has not written yet cannot be answered: no peer could)."""
        on_wire = {ref for _, _, ref in self.sent}
        return [(topic, ref) for ref, (topic, _) in self.handlers.items() if ref in on_wire]

    def reply(self, ref: str, status: str = "ok", reason: str | None = None) -> None:
        _, handler = self.handlers.pop(ref)
        handler(Reply(status=status, response={"reason": reason} if reason else {}))

    async def next_frames(self) -> None:
        """Return once a write has come that this has not returned for yet."""
        while self.writes == self.seen:
            await self._wrote.wait()
        self.seen = self.writes


def _joiner(socket: _Socket, rooms: _Rooms, policy: Policy = POLICY) -> tuple[Joiner, list[str]]:
    joined: list[str] = []

    def on_joined(room: object) -> None:
        assert isinstance(room, _Room)
        joined.append(room.id)
        room.joined(socket)

    joiner = Joiner(socket, rooms=rooms, policy=policy, on_joined=on_joined)  # type: ignore[arg-type]
    return joiner, joined


async def _answer_all(socket: _Socket, until: Callable[[], bool]) -> None:
    while True:
        for _, ref in socket.open_joins():
            socket.reply(ref)
        if until():
            return
        await socket.next_frames()


async def test_every_room_joins_chat_then_participants_in_few_writes(
    autojump_clock: object,
) -> None:
    socket, rooms = _Socket(), _Rooms(*(f"r{i}" for i in range(50)))
    joiner, joined = _joiner(socket, rooms)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        for room in rooms.current.values():
            joiner.add(room)
        joiner.add(rooms.current["r0"])  # the same room twice: joined once
        nursery.start_soon(_answer_all, socket, lambda: len(joined) == 50)
        with trio.fail_after(1):
            await joiner.wait_done()
        nursery.cancel_scope.cancel()
    assert sorted(joined) == sorted(rooms.current)
    chat = [t for e, t, _ in socket.sent if t.startswith("chat_room:")]
    participants = [t for e, t, _ in socket.sent if t.startswith("room_participants:")]
    assert len(chat) == len(participants) == 50  # r0 once
    for room in rooms.current:  # chat_room first, then room_participants
        order = [t for _, t, _ in socket.sent if t.endswith(f":{room}")]
        assert order == [f"chat_room:{room}", f"room_participants:{room}"]
    assert socket.writes < 10  # the 50 chat joins went out in one write, not 50


async def test_the_window_holds_a_room_for_both_its_joins(autojump_clock: object) -> None:
    socket, rooms = _Socket(), _Rooms(*(f"r{i}" for i in range(7)))
    joiner, joined = _joiner(socket, rooms, POLICY.replace(join_window=2))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        for room in rooms.current.values():
            joiner.add(room)
        most = 0
        while len(joined) < 7:
            while not socket.open_joins():
                await socket.next_frames()
            # rooms with a join on the wire: never more than the window
            most = max(most, len({topic.partition(":")[2] for topic, _ in socket.open_joins()}))
            newest = socket.open_joins()[-1][1]  # answer out of order: newest first
            socket.reply(newest)
            await trio.testing.wait_all_tasks_blocked()
            for _, ref in socket.open_joins():
                socket.reply(ref)
        await joiner.wait_done()
        nursery.cancel_scope.cancel()
    assert most == 2
    assert sorted(joined) == sorted(rooms.current)
    first_chat = [t for _, t, _ in socket.sent if t.startswith("chat_room:")][:2]
    assert first_chat == ["chat_room:r0", "chat_room:r1"]  # in the order they came


async def test_an_unanswered_join_is_retried_after_its_deadline(autojump_clock: object) -> None:
    socket, rooms = _Socket(), _Rooms("a")
    joiner, joined = _joiner(socket, rooms)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        start = trio.current_time()
        joiner.add(rooms.current["a"])
        await socket.next_frames()
        ((_, silent),) = socket.open_joins()  # never answered
        with trio.fail_after(60):
            await socket.next_frames()  # the retry: its deadline, then the backoff
        assert trio.current_time() - start >= POLICY.join_deadline + POLICY.join_retry_base
        assert silent not in socket.handlers  # the late reply would be dropped
        await _answer_all(socket, lambda: joined == ["a"])
        await joiner.wait_done()
        nursery.cancel_scope.cancel()
    assert [t for _, t, _ in socket.sent].count("chat_room:a") == 2


async def test_a_refused_participants_join_leaves_chat_and_retries(autojump_clock: object) -> None:
    socket, rooms = _Socket(), _Rooms("a")
    joiner, joined = _joiner(socket, rooms)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        joiner.add(rooms.current["a"])
        await socket.next_frames()
        socket.reply(socket.open_joins()[0][1])  # chat_room: ok
        await socket.next_frames()
        socket.reply(socket.open_joins()[0][1], "error", "no")  # room_participants: no
        await socket.next_frames()
        assert socket.sent[2][:2] == ("phx_leave", "chat_room:a")
        assert not socket.channels.is_joined("chat_room:a")
        await _answer_all(socket, lambda: joined == ["a"])
        await joiner.wait_done()
        nursery.cancel_scope.cancel()
    assert socket.channels.is_joined("chat_room:a")
    assert socket.channels.is_joined("room_participants:a")


async def test_a_room_refused_too_often_is_given_up_alone(autojump_clock: object) -> None:
    socket, rooms = _Socket(), _Rooms("bad", "good")
    joiner, joined = _joiner(socket, rooms)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        joiner.add(rooms.current["bad"])
        joiner.add(rooms.current["good"])
        while joiner_busy(rooms, joined):
            await socket.next_frames()
            for topic, ref in socket.open_joins():
                socket.reply(ref, *(("error", "nope") if topic.endswith(":bad") else ()))
        with trio.fail_after(60):
            await joiner.wait_done()
        nursery.cancel_scope.cancel()
    assert rooms.removed == ["bad"]
    assert joined == ["good"]
    refused = [t for _, t, _ in socket.sent if t == "chat_room:bad"]
    assert len(refused) == POLICY.join_refusals + 1


def joiner_busy(rooms: _Rooms, joined: list[str]) -> bool:
    return not (rooms.removed and joined)


async def test_a_room_left_mid_join_leaves_its_topics(autojump_clock: object) -> None:
    socket, rooms = _Socket(), _Rooms("a")
    joiner, joined = _joiner(socket, rooms)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        joiner.add(rooms.current["a"])
        await socket.next_frames()
        socket.reply(socket.open_joins()[0][1])
        await socket.next_frames()
        del rooms.current["a"]  # left while room_participants is in flight
        socket.reply(socket.open_joins()[0][1])
        with trio.fail_after(1):  # the leaves: autojump ends a wait for nothing at once
            await socket.next_frames()
        await joiner.wait_done()
        nursery.cancel_scope.cancel()
    assert joined == []
    assert [(e, t) for e, t, _ in socket.sent[2:]] == [
        ("phx_leave", "chat_room:a"),
        ("phx_leave", "room_participants:a"),
    ]


async def test_a_socket_closing_under_a_send_ends_the_joiner_with_the_socket(
    autojump_clock: object,
) -> None:
    """A send that finds the websocket closed is no failure of the connection's set-up:
    the joiner waits for the close the socket's reader sees, and ends without raising."""
    socket, rooms = _Socket(), _Rooms("a")
    joiner, joined = _joiner(socket, rooms)
    socket.broken = True
    ended = trio.Event()

    async def run() -> None:
        await joiner.run()
        ended.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        joiner.add(rooms.current["a"])
        await trio.testing.wait_all_tasks_blocked()
        assert not ended.is_set()  # waiting for the socket's own close
        socket.closed.set()
        with trio.fail_after(1):
            await ended.wait()
    assert joined == []


async def test_joins_behind_a_slow_platform_wait_while_it_still_answers(
    autojump_clock: object,
) -> None:
    """A platform works through a burst of joins in order: while it still answers, the
    joins behind wait their turn (the deadline, 5 s here, counts from the later of the
    write and the last reply); one it never answers fails `join_deadline` after the
    last reply, and is retried."""
    socket, rooms = _Socket(), _Rooms(*(f"r{i}" for i in range(12)))
    joiner, joined = _joiner(socket, rooms)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        for room in rooms.current.values():
            joiner.add(room)
        await socket.next_frames()
        start = trio.current_time()
        answered = 0
        while answered < 11:  # one chat join answered every 2 s; r11's never
            await trio.sleep(2)
            socket.reply(socket.open_joins()[0][1])
            answered += 1
        # 22 s after the writes, no join was given up: only the first write so far
        assert [t for _, t, _ in socket.sent].count("chat_room:r11") == 1
        last = trio.current_time()
        with trio.fail_after(60):
            while [t for _, t, _ in socket.sent].count("chat_room:r11") < 2:
                await socket.next_frames()
        retried = trio.current_time()
        assert retried - last >= POLICY.join_deadline  # its deadline ran from the last reply
        assert retried - start > 20
        nursery.cancel_scope.cancel()
    assert joined == []  # (their room_participants joins were never answered here)


async def test_a_room_left_and_added_again_mid_join_keeps_the_newer_join(
    autojump_clock: object,
) -> None:
    """The older join's late answer must not leave the topics (same names) the newer
    room's join took, nor record its own join ref over the newer one."""
    socket, rooms = _Socket(), _Rooms("a")
    joiner, joined = _joiner(socket, rooms)
    older = rooms.current["a"]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(joiner.run)
        joiner.add(older)
        await socket.next_frames()
        socket.reply(socket.open_joins()[0][1])  # the older room's chat_room: ok
        await socket.next_frames()
        ((_, older_participants),) = socket.open_joins()
        newer = rooms.current["a"] = _Room("a")  # left and added again
        joiner.add(newer)
        await socket.next_frames()  # the newer room's chat_room join
        socket.reply(older_participants)  # the older join's late answer
        with trio.fail_after(60):
            await _answer_all(socket, lambda: joined == ["a"])
            await joiner.wait_done()
        nursery.cancel_scope.cancel()
    assert newer.joined_on == [socket] and older.joined_on == []
    assert not any(event == "phx_leave" for event, _, _ in socket.sent)
    newest = [ref for _, topic, ref in socket.sent if topic == "room_participants:a"][-1]
    assert socket.channels.is_current(
        Frame(join_ref=newest, ref=None, topic="room_participants:a", event="x", payload={})
    )
