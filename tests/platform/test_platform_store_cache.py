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


def test_the_room_list_follows_every_change_of_membership(tmp_path: Path) -> None:
    """`rooms_of` keeps an agent's sorted rooms between pages (issue 44); each change
    of who is in which room drops it, so every page after a change says what the
    tables say (a second store on the same file reads only the tables)."""
    path = str(tmp_path / "platform.db")
    store = Store(path)
    a, b = store.create_agent().id, store.create_agent().id
    rooms = [store.create_room(title=f"r{i}").id for i in range(5)]
    for room in rooms[:4]:
        store.add_participant(room, a)
        store.add_participant(room, b)

    def listed(s: Store, pid: str) -> list[tuple[list[str], int]]:
        pages = [[r.id for r in s.rooms_of(pid, offset=o, limit=2)] for o in (0, 2, 4)]
        return [(page, s.count_rooms_of(pid)) for page in pages] + [
            ([r.id for r in s.rooms_of(pid)], -1)
        ]

    steps = [
        lambda: store.add_participant(rooms[4], a),
        lambda: store.remove_participant(rooms[0], a),
        lambda: store.delete_room(rooms[1]),
        lambda: store.add_participant(rooms[0], a),
    ]
    for step in steps:
        before = {pid: listed(store, pid) for pid in (a, b)}  # the lists are kept now
        step()
        fresh = Store(path)
        for pid in (a, b):
            assert listed(store, pid) == listed(fresh, pid), (step, before[pid])
        fresh.close()
    store.close()
