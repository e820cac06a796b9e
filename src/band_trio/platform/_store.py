"""The platform's state in sqlite3: synchronous, indexed, and durable on a file.

Nothing here knows about trio, HTTP or websockets: the store answers queries
and applies changes, and the callers decide what to push. Each write commits
at once (autocommit), so a platform stopped at any point and restarted on the
same file loses nothing it had acknowledged. Agents and users are also cached
in dicts, because every REST request authenticates and most render names; so
are rooms, their participants and the stopped gates, because every
room route checks membership and the gate first, and an sqlite read costs
~15-20 µs in a request's cold path against well under 1 µs for a dict (see
benchmarks/platform_floor.py). The most recent messages and deliveries are
kept too (`Recent`, bounded), for the claim and the marks. Every cache is
written through: the table is changed first, then the cache, by the same
`Store` method.
"""

from __future__ import annotations

import itertools
import re
import secrets
import sqlite3
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec

from ._handles import Handles
from ._recent import Recent
from ._records import SCHEMA, Agent, Delivery, Message, Room, User, agent_fields, now_iso
from ._store_pages import MSG_COLUMNS, StorePages, message_of

__all__ = ["Agent", "Delivery", "Message", "Room", "Store", "User", "now_iso"]

RECENT = 4096
"""How many messages, and how many deliveries, the store keeps at hand."""


_TEXT = "m.message_type = 'text'"
"""The room's messages proper: an event is listed in `messages` for `/context` only."""
_json_encode = msgspec.json.Encoder().encode
_NOT_IN_A_HANDLE = re.compile(r"[^\w.-]")


def _word(text: str) -> str:
    """`text` as part of a default handle or name: `-` for each character the console
    could not mention (a handle is letters, digits, `_`, `.` and `-`)."""
    return _NOT_IN_A_HANDLE.sub("-", text)


_json_decode = msgspec.json.decode


class Store(StorePages):
    """All platform state. `path=None` keeps it in memory."""

    def __init__(self, path: str | None = None) -> None:
        self._db = sqlite3.connect(path or ":memory:", isolation_level=None)
        if path:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self.agents: dict[str, Agent] = {}
        self.agents_by_key: dict[str, Agent] = {}
        self.users: dict[str, User] = {}
        self.handles = Handles()
        """Who owns each handle, agents' and users' alike (`_handles`)."""
        for row in self._db.execute("SELECT * FROM agents"):
            self._cache_agent(Agent(*row))
        for row in self._db.execute("SELECT * FROM users"):
            self.users[row[0]] = User(*row)
            self.handles.add(row[2], row[0])
        self._rooms: dict[str, Room] = {}
        self._members: dict[str, dict[str, None]] = {}
        """Each room's participants in `position` order (a dict as an ordered set)."""
        self._listed: dict[str, list[Room]] = {}
        """Per participant, its rooms in the room list's order, kept from one page of
        `GET /chats` to the next until its rooms change: sorting an agent's 10,000 rooms
        for each of its 100 pages took the platform ~1.8 s at every connect."""
        self._stopped: set[tuple[str, str]] = set()
        """The (agent_id, room_id) pairs of the `stopped` table."""
        self._recent_messages: Recent[str, Message] = Recent(RECENT)
        self._recent_deliveries: Recent[tuple[str, int], Delivery] = Recent(RECENT)
        for row in self._db.execute("SELECT * FROM rooms"):
            self._rooms[row[0]] = Room(*row)
        for room_id, pid in self._db.execute(
            "SELECT room_id, pid FROM participants ORDER BY room_id, position"
        ):
            self._members.setdefault(room_id, {})[pid] = None
        for agent_id, room_id in self._db.execute("SELECT agent_id, room_id FROM stopped"):
            self._stopped.add((agent_id, room_id))

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """`BEGIN` ... `COMMIT`, rolled back on any error, and that error raised.

        sqlite ends a transaction by itself on some errors (SQLITE_FULL "database or
        disk is full", SQLITE_IOERR, SQLITE_NOMEM), so the rollback is tried only
        when one is still open; a `ROLLBACK` without one fails with "cannot rollback
        - no transaction is active", which was logged and raised over the disk's
        error. A rollback that fails all the same is a note on the error, not a
        replacement for it."""
        db = self._db
        db.execute("BEGIN")
        try:
            yield
            db.execute("COMMIT")
        except BaseException as exc:
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error as failed:
                    exc.add_note(f"and the rollback failed: {failed}")
            raise

    # -- meta -----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- agents and users -----------------------------------------------------

    def _cache_agent(self, agent: Agent) -> None:
        self.agents[agent.id] = agent
        self.agents_by_key[agent.api_key] = agent
        self.handles.add(agent.handle, agent.id)

    def create_agent(
        self,
        *,
        id: str | None = None,
        name: str | None = None,
        handle: str | None = None,
        description: str | None = None,
        api_key: str | None = None,
    ) -> Agent:
        agent_id = id or str(uuid.uuid4())
        if agent_id in self.agents or agent_id in self.users:
            raise ValueError(f"participant {agent_id} already exists")
        key = api_key or f"bt_{secrets.token_hex(16)}"
        if key in self.agents_by_key:
            raise ValueError("api_key already in use")
        short = _word(agent_id[:8])
        agent = Agent(
            agent_id,
            key,
            name or f"Agent {short}",
            self.handles.check(handle) if handle else self.handles.free(f"agent-{short}"),
            description or "An agent on the band-trio embedded platform",
            str(uuid.uuid4()),
            now_iso(),
        )
        self._db.execute(
            "INSERT INTO agents VALUES (?, ?, ?, ?, ?, ?, ?)", tuple(agent_fields(agent))
        )
        self._cache_agent(agent)
        return agent

    def create_user(
        self, *, id: str | None = None, name: str | None = None, handle: str | None = None
    ) -> User:
        user_id = id or str(uuid.uuid4())
        if user_id in self.agents or user_id in self.users:
            raise ValueError(f"participant {user_id} already exists")
        short = _word(user_id[:8])
        handle = self.handles.check(handle) if handle else self.handles.free(f"user-{short}")
        user = User(user_id, name or f"User {short}", handle, now_iso())
        self._db.execute(
            "INSERT INTO users VALUES (?, ?, ?, ?)",
            (user.id, user.name, user.handle, user.inserted_at),
        )
        self.users[user.id] = user
        self.handles.add(user.handle, user.id)
        return user

    def profile(self, pid: str) -> Agent | User | None:
        return self.agents.get(pid) or self.users.get(pid)

    # -- rooms and participants -----------------------------------------------

    def create_room(self, *, id: str | None = None, title: str | None = None) -> Room:
        if id is not None and self.room(id) is not None:
            raise ValueError(f"room {id} already exists")
        room = Room(id or str(uuid.uuid4()), title, now_iso())
        self._db.execute(
            "INSERT INTO rooms VALUES (?, ?, ?)", (room.id, room.title, room.inserted_at)
        )
        self._rooms[room.id] = room
        return room

    def room(self, room_id: str) -> Room | None:
        return self._rooms.get(room_id)

    def rooms(self, limit: int) -> tuple[list[Room], int]:
        """Up to `limit` rooms, oldest first, and how many there are in all."""
        return list(itertools.islice(self._rooms.values(), limit)), len(self._rooms)

    def delete_room(self, room_id: str) -> None:
        db = self._db
        with self._transaction():
            db.execute(
                "DELETE FROM deliveries WHERE seq IN (SELECT seq FROM messages WHERE room_id = ?)",
                (room_id,),
            )
            for table in ("messages", "events", "participants", "stopped"):
                db.execute(f"DELETE FROM {table} WHERE room_id = ?", (room_id,))
            db.execute("DELETE FROM rooms WHERE id = ?", (room_id,))
        self._rooms.pop(room_id, None)
        for pid in self._members.pop(room_id, {}):
            self._listed.pop(pid, None)
        self._recent_messages.clear()
        self._recent_deliveries.clear()
        self._stopped = {key for key in self._stopped if key[1] != room_id}

    def add_participant(self, room_id: str, pid: str) -> bool:
        """Append `pid` to the room's ordered participants; False if already in it."""
        cur = self._db.execute(
            "INSERT OR IGNORE INTO participants SELECT ?, ?, COALESCE(MAX(position), 0) + 1 "
            "FROM participants WHERE room_id = ?",
            (room_id, pid, room_id),
        )
        if cur.rowcount > 0:
            self._members.setdefault(room_id, {})[pid] = None
            self._listed.pop(pid, None)
            return True
        return False

    def remove_participant(self, room_id: str, pid: str) -> bool:
        cur = self._db.execute(
            "DELETE FROM participants WHERE room_id = ? AND pid = ?", (room_id, pid)
        )
        self._db.execute("DELETE FROM stopped WHERE room_id = ? AND agent_id = ?", (room_id, pid))
        self._members.get(room_id, {}).pop(pid, None)
        self._listed.pop(pid, None)
        self._stopped.discard((pid, room_id))
        return cur.rowcount > 0

    def participants(self, room_id: str) -> list[str]:
        return list(self._members.get(room_id, ()))

    def is_participant(self, room_id: str, pid: str) -> bool:
        return pid in self._members.get(room_id, ())

    def rooms_of(self, pid: str, *, offset: int = 0, limit: int = -1) -> list[Room]:
        """`pid`'s rooms, oldest first (then by id), from `offset`, at most `limit`."""
        listed = self._listed.get(pid)
        if listed is None:
            rows = self._db.execute(
                "SELECT r.id, r.title, r.inserted_at FROM participants p JOIN rooms r "
                "ON r.id = p.room_id WHERE p.pid = ? ORDER BY r.inserted_at, r.id",
                (pid,),
            )
            listed = self._listed[pid] = [Room(*row) for row in rows]
        return listed[offset : None if limit < 0 else offset + limit]

    def count_rooms_of(self, pid: str) -> int:
        listed = self._listed.get(pid)
        if listed is not None:
            return len(listed)
        row = self._db.execute("SELECT COUNT(*) FROM participants WHERE pid = ?", (pid,)).fetchone()
        return int(row[0])

    # -- messages and delivery ------------------------------------------------

    def add_message(
        self,
        room_id: str,
        *,
        sender_id: str,
        sender_type: str,
        sender_name: str | None,
        content: str,
        mentions: list[dict[str, Any]],
        recipients: Iterable[str],
        message_type: str = "text",
    ) -> Message:
        """Store a message and a `delivered` row for each recipient agent, atomically."""
        db = self._db
        message_id = str(uuid.uuid4())
        inserted_at = now_iso()
        with self._transaction():
            cur = db.execute(
                "INSERT INTO messages (id, room_id, content, sender_id, sender_type, sender_name, "
                "message_type, mentions, inserted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    message_id, room_id, content, sender_id, sender_type, sender_name,
                    message_type, _json_encode(mentions).decode(), inserted_at,
                ),
            )  # fmt: skip
            seq = cur.lastrowid
            assert seq is not None
            db.executemany(
                "INSERT INTO deliveries VALUES (?, ?, ?, 'delivered', 0, 0)",
                [(seq, agent_id, room_id) for agent_id in recipients],
            )
        message = Message(
            seq, message_id, room_id, content, sender_id, sender_type, sender_name,
            message_type, mentions, inserted_at,
        )  # fmt: skip
        self._recent_messages.put(message_id, message)
        delivered = Delivery("delivered", 0, 0)
        for agent_id in recipients:
            self._recent_deliveries.put((agent_id, seq), delivered)
        return message

    def message(self, message_id: str) -> Message | None:
        message = self._recent_messages.get(message_id)
        if message is not None:
            return message
        row = self._db.execute(
            f"SELECT {MSG_COLUMNS} FROM messages m WHERE m.id = ?", (message_id,)
        ).fetchone()
        if row is None:
            return None
        message = message_of(row)
        self._recent_messages.put(message_id, message)
        return message

    def messages(self, room_id: str) -> list[Message]:
        rows = self._db.execute(
            f"SELECT {MSG_COLUMNS} FROM messages m WHERE m.room_id = ? AND {_TEXT} ORDER BY m.seq",
            (room_id,),
        )
        return [message_of(row) for row in rows]

    def recent_messages(self, room_id: str, limit: int) -> tuple[list[Message], int]:
        """The room's newest `limit` messages, oldest first, and its message count."""
        rows = self._db.execute(
            f"SELECT {MSG_COLUMNS} FROM messages m WHERE m.room_id = ? AND {_TEXT} "
            "ORDER BY m.seq DESC LIMIT ?",
            (room_id, limit),
        ).fetchall()
        total = self._db.execute(
            f"SELECT COUNT(*) FROM messages m WHERE m.room_id = ? AND {_TEXT}", (room_id,)
        ).fetchone()[0]
        return [message_of(row) for row in reversed(rows)], int(total)

    def deliveries_from(self, room_id: str, seq: int) -> dict[int, dict[str, Delivery]]:
        """Every recipient's delivery of the room's messages from `seq` on, by message."""
        rows = self._db.execute(
            "SELECT seq, agent_id, status, attempts, current_attempt FROM deliveries "
            "WHERE room_id = ? AND seq >= ?",
            (room_id, seq),
        )
        found: dict[int, dict[str, Delivery]] = {}
        for row in rows:
            found.setdefault(row[0], {})[row[1]] = Delivery(*row[2:])
        return found

    def delivery(self, seq: int, agent_id: str) -> Delivery | None:
        delivery = self._recent_deliveries.get((agent_id, seq))
        if delivery is not None:
            return delivery
        row = self._db.execute(
            "SELECT status, attempts, current_attempt FROM deliveries WHERE agent_id = ? "
            "AND seq = ?",
            (agent_id, seq),
        ).fetchone()
        if row is None:
            return None
        delivery = Delivery(*row)
        self._recent_deliveries.put((agent_id, seq), delivery)
        return delivery

    def deliveries(self, seq: int) -> dict[str, Delivery]:
        rows = self._db.execute(
            "SELECT agent_id, status, attempts, current_attempt FROM deliveries WHERE seq = ?",
            (seq,),
        )
        return {row[0]: Delivery(*row[1:]) for row in rows}

    def set_delivery(self, seq: int, agent_id: str, delivery: Delivery) -> None:
        cur = self._db.execute(
            "UPDATE deliveries SET status = ?, attempts = ?, current_attempt = ? "
            "WHERE agent_id = ? AND seq = ?",
            (delivery.status, delivery.attempts, delivery.current_attempt, agent_id, seq),
        )
        if cur.rowcount > 0:
            self._recent_deliveries.put((agent_id, seq), delivery)

    # -- events and gates -----------------------------------------------------

    def add_event(
        self,
        room_id: str,
        sender_id: str,
        content: str,
        message_type: str,
        metadata: dict[str, Any] | None,
    ) -> str:
        """Store an event, and list it among the room's messages as the documented
        context does ("all messages the agent sent, any type": band-client-rest 0.0.51):
        a row of its type in `messages`, with no delivery, so only `/context` shows it
        (not `/next`, `/messages`, the console's or the admin API's message lists)."""
        event_id = str(uuid.uuid4())
        inserted_at = now_iso()
        db = self._db
        db.execute("BEGIN")
        try:
            db.execute(
                "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    event_id, room_id, sender_id, content, message_type,
                    None if metadata is None else _json_encode(metadata).decode(), inserted_at,
                ),
            )  # fmt: skip
            db.execute(
                "INSERT INTO messages (id, room_id, content, sender_id, sender_type, "
                "sender_name, message_type, mentions, inserted_at) "
                "VALUES (?, ?, ?, ?, 'Agent', NULL, ?, '[]', ?)",
                (event_id, room_id, content, sender_id, message_type, inserted_at),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return event_id

    def events(self, room_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT id, sender_id, content, message_type FROM events WHERE room_id = ? "
            "ORDER BY rowid",
            (room_id,),
        )
        keys = ("id", "sender_id", "content", "message_type")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def recent_events(self, room_id: str, limit: int) -> tuple[list[dict[str, Any]], int]:
        """The room's newest `limit` events (`id`, `sender_id`, `content`, `message_type`,
        `inserted_at`), oldest first, and its event count."""
        rows = self._db.execute(
            "SELECT id, sender_id, content, message_type, inserted_at FROM events "
            "WHERE room_id = ? ORDER BY rowid DESC LIMIT ?",
            (room_id, limit),
        ).fetchall()
        total = self._db.execute(
            "SELECT COUNT(*) FROM events WHERE room_id = ?", (room_id,)
        ).fetchone()[0]
        keys = ("id", "sender_id", "content", "message_type", "inserted_at")
        return [dict(zip(keys, row, strict=True)) for row in reversed(rows)], int(total)

    def is_stopped(self, agent_id: str, room_id: str) -> bool:
        return (agent_id, room_id) in self._stopped

    def stop(self, agent_id: str, room_ids: Iterable[str]) -> None:
        keys = [(agent_id, room_id) for room_id in room_ids]
        self._db.executemany("INSERT OR IGNORE INTO stopped VALUES (?, ?)", keys)
        self._stopped.update(keys)

    def play(self, agent_id: str, room_id: str | None) -> None:
        if room_id is None:
            self._db.execute("DELETE FROM stopped WHERE agent_id = ?", (agent_id,))
            self._stopped = {key for key in self._stopped if key[0] != agent_id}
        else:
            self._db.execute(
                "DELETE FROM stopped WHERE agent_id = ? AND room_id = ?", (agent_id, room_id)
            )
            self._stopped.discard((agent_id, room_id))
