"""The store's caches say what its tables say: a second store opened on the same
file (which reads only the tables) answers every cached query the same way."""

from __future__ import annotations

from pathlib import Path

from band_trio.platform._store import Delivery, Store


def _view(store: Store, rooms: list[str], agents: list[str], messages: list[str]) -> object:
    seen = []
    for room in rooms:
        seen.append(("room", room, store.room(room)))
        seen.append(("participants", room, store.participants(room)))
        for agent in agents:
            seen.append(("member", room, agent, store.is_participant(room, agent)))
            seen.append(("stopped", room, agent, store.is_stopped(agent, room)))
    for message_id in messages:
        message = store.message(message_id)
        seen.append(("message", message_id, message))
        for agent in agents:
            delivery = None if message is None else store.delivery(message.seq, agent)
            seen.append(("delivery", message_id, agent, delivery))
    return seen


def test_the_caches_agree_with_the_tables(tmp_path: Path) -> None:
    path = str(tmp_path / "platform.db")
    store = Store(path)
    a, b = store.create_agent().id, store.create_agent().id
    user = store.create_user().id
    r1, r2 = store.create_room(title="one").id, store.create_room(title="two").id
    for room in (r1, r2):
        for pid in (user, a, b):
            store.add_participant(room, pid)
    store.remove_participant(r1, a)
    store.add_participant(r1, a)  # back in, now last
    messages = []
    for room in (r1, r2):
        m = store.add_message(
            room, sender_id=user, sender_type="User", sender_name="U", content="hi",
            mentions=[], recipients=[a, b],
        )  # fmt: skip
        messages.append(m.id)
    store.stop(b, [r2])
    store.delete_room(r2)  # clears the recent caches: what follows must refill them right
    store.add_participant(r2, a)  # a room that is gone still has the rows added to it
    first = store.message(messages[0])
    assert first is not None
    assert store.delivery(first.seq, a) == Delivery("delivered", 0, 0)  # now cached
    store.set_delivery(first.seq, a, Delivery("processing", 1, 1))
    store.set_delivery(10_000, a, Delivery("processed", 1, 1))  # no such row: nothing changes
    store.stop(a, [r1, r2])
    store.play(a, r2)
    store.stop(user, [r1, r2])
    store.play(user, None)
    store.stop(b, [r1])
    store.remove_participant(r1, b)  # also lifts b's gate there
    rooms, agents = [r1, r2, "no-such-room"], [a, b, user]
    messages.append("no-such-message")
    ours = _view(store, rooms, agents, messages)
    store.close()
    fresh = Store(path)
    try:
        assert _view(fresh, rooms, agents, messages) == ours
    finally:
        fresh.close()
