"""`Policy.join_window`: at most that many rooms' joins await their replies on one
connection; the others wait their turn, and each room still joins `chat_room` before
`room_participants` (a stand-in socket: what is counted is the client's side)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from band_trio import Policy
from band_trio.runtime._connection import Connection


class StandInSocket:
    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.order: list[str] = []
        self.answer = trio.Event()

    async def join(self, topic: str) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.answer.wait()
            self.order.append(topic)
        finally:
            self.in_flight -= 1


class StandInRoom:
    def __init__(self, room_id: str) -> None:
        self.id = room_id
        self.joined_on: Any = None

    def joined(self, socket: Any) -> None:
        self.joined_on = socket


class StandInRooms:
    def __init__(self, rooms: list[StandInRoom]) -> None:
        self.by_id = {room.id: room for room in rooms}

    def get(self, room_id: str) -> StandInRoom | None:
        return self.by_id.get(room_id)


async def test_at_most_the_window_of_rooms_await_their_joins() -> None:
    rooms = [StandInRoom(f"r{i}") for i in range(7)]
    socket = StandInSocket()
    conn = Connection(
        agent_id="a",
        rooms=StandInRooms(rooms),  # type: ignore[arg-type]
        control=None,  # type: ignore[arg-type]
        policy=Policy(join_window=3),
    )
    conn.socket = socket  # type: ignore[assignment]
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for room in rooms:
                nursery.start_soon(conn.join_room, room)
            await trio.testing.wait_all_tasks_blocked()
            assert socket.in_flight == 3  # the window, not all seven
            socket.answer.set()
    assert socket.peak == 3
    assert all(room.joined_on is socket for room in rooms)
    for room in rooms:  # chat_room first, never beside its room_participants
        assert socket.order.index(f"chat_room:{room.id}") < socket.order.index(
            f"room_participants:{room.id}"
        )
