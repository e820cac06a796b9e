"""A room's queue on its own: what a drop for a catch-up keeps."""

from __future__ import annotations

from band_trio.contract import Message
from band_trio.runtime._inbound import Inbound, event_unit
from band_trio.runtime._queue import RoomQueue


def _message(message_id: str) -> Inbound:
    return Inbound(
        Message(id=message_id, room_id="r", content="", sender_id="u", sender_type="User"), False
    )


class _Unit:
    def __init__(self, message_id: str) -> None:
        self.message = Message(id=message_id, room_id="r", content="", sender_id="", sender_type="")

    async def run(self, room: object) -> bool:
        return False


def test_a_drop_keeps_events_and_submitted_units_in_order_and_forgets_the_messages() -> None:
    queue = RoomQueue()
    unit = _Unit("submitted")
    for item in (_message("a"), event_unit("r", "participant_added", {}), _message("b")):
        queue.add(item)
    queue.add(Inbound(unit.message, False, submitted=unit))
    assert queue.ids == {"a", "b"}  # the sync point: pushed messages only
    assert queue.drop_messages() == 2
    assert queue.ids == set() and len(queue) == 2
    assert queue.pop().event == "participant_added"
    assert queue.withdraw(unit) and not queue


def test_events_alone_past_the_cap_lose_their_oldest() -> None:
    queue = RoomQueue()
    for i in range(5):
        queue.add(event_unit("r", f"event {i}", {}))
    assert queue.drop_messages(cap=3) == 3
    assert [queue.pop().event for _ in range(len(queue))] == ["event 3", "event 4"]
