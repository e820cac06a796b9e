"""A full disk under the platform's sqlite store (`--db`): the error raised is the disk's.

sqlite rolls a transaction back by itself on SQLITE_FULL, so the store's own
ROLLBACK found none and raised "cannot rollback - no transaction is active" over
the real error (issue 38, item 7f). The disk is made full for real: sqlite's
`max_page_count` caps the file a few pages past what it holds.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from band_trio.platform._store import Store


def full_store(path: Path) -> tuple[Store, str, str, str]:
    store = Store(str(path))
    agent, user, room = store.create_agent(), store.create_user(), store.create_room()
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count = {pages + 2}")
    return store, agent.id, user.id, room.id


def test_a_message_on_a_full_disk_raises_the_disks_error(tmp_path: Path) -> None:
    store, agent, user, room = full_store(tmp_path / "platform.db")
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full") as caught:
        store.add_message(
            room, sender_id=user, sender_type="User", sender_name="u", content="x" * 200_000,
            mentions=[], recipients=[agent],
        )  # fmt: skip
    assert "rollback" not in str(caught.value)
    assert not store._db.in_transaction
    assert store.messages(room) == []  # nothing half-written
    small = store.add_message(
        room, sender_id=user, sender_type="User", sender_name="u", content="hi",
        mentions=[], recipients=[agent],
    )  # fmt: skip
    assert store.message(small.id) == small  # and the store goes on
    store.close()


def test_a_room_deletion_that_fails_keeps_the_room_and_raises_its_error(tmp_path: Path) -> None:
    store, agent, _, room = full_store(tmp_path / "platform.db")
    store.add_participant(room, agent)

    class Failing:
        """The connection, but its DELETE of the rooms row fails as a full disk would
        fail it (sqlite rolls back the transaction first, as for SQLITE_FULL)."""

        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        @property
        def in_transaction(self) -> bool:
            return self.db.in_transaction

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql.startswith("DELETE FROM rooms"):
                self.db.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.execute(sql, *args)

    real = store._db
    store._db = Failing(real)  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        store.delete_room(room)
    store._db = real
    assert not real.in_transaction
    assert store.room(room) is not None and store.participants(room) == [agent]
    store.close()
