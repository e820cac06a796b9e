"""The store's paged reads of messages: what an agent must act on, and its context.

A mixin of `Store` (it shares the connection): each read is one indexed query,
oldest first unless asked otherwise, cut by a `seq` cursor or an offset.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import msgspec

from ._records import Delivery, Message

__all__ = ["MSG_COLUMNS", "STATUS_FILTERS", "StorePages", "message_of"]

MSG_COLUMNS = (
    "m.seq, m.id, m.room_id, m.content, m.sender_id, m.sender_type, m.sender_name, "
    "m.message_type, m.mentions, m.inserted_at"
)
_DELIVERY = "d.status, d.attempts, d.current_attempt"

STATUS_FILTERS: dict[str | None, str] = {
    None: "d.status != 'processed'",
    "pending": "d.status IN ('delivered', 'failed')",
    "processing": "d.status = 'processing'",
    "processed": "d.status = 'processed'",
    "failed": "d.status = 'failed'",
    "all": "1 = 1",
}
"""`GET .../messages?status=` as SQL over the agent's deliveries (None: no `status`:
everything not processed). `pending` is untouched or failed without a live attempt
(a failed message claimed again is `processing`)."""

_json_decode = msgspec.json.decode


def message_of(row: tuple[Any, ...]) -> Message:
    return Message(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7],
        _json_decode(row[8]), row[9],
    )  # fmt: skip


def _window(after: int | None, before: int | None) -> tuple[str, list[int]]:
    where, args = "", []
    if after is not None:
        where, args = " AND m.seq > ?", [after]
    if before is not None:
        where, args = f"{where} AND m.seq < ?", [*args, before]
    return where, args


class StorePages:
    _db: sqlite3.Connection

    def next_pending(self, agent_id: str, room_id: str) -> tuple[Message, Delivery] | None:
        """The oldest message in the room this agent must still act on (not processed)."""
        row = self._db.execute(
            f"SELECT {MSG_COLUMNS}, {_DELIVERY} FROM deliveries d "
            "JOIN messages m ON m.seq = d.seq WHERE d.agent_id = ? AND d.room_id = ? "
            "AND d.status != 'processed' ORDER BY d.seq LIMIT 1",
            (agent_id, room_id),
        ).fetchone()
        return None if row is None else (message_of(row[:10]), Delivery(*row[10:]))

    def deliveries_page(
        self,
        agent_id: str,
        room_id: str,
        status: str | None,
        *,
        limit: int,
        after: int | None = None,
        before: int | None = None,
        newest_first: bool = False,
        offset: int = 0,
    ) -> list[tuple[Message, Delivery]]:
        """The agent's messages in the room whose delivery matches `status`
        (`STATUS_FILTERS`), between the `seq` bounds, one page of them."""
        window, args = _window(after, before)
        rows = self._db.execute(
            f"SELECT {MSG_COLUMNS}, {_DELIVERY} FROM deliveries d "
            "JOIN messages m ON m.seq = d.seq WHERE d.agent_id = ? AND d.room_id = ? "
            f"AND {STATUS_FILTERS[status]}{window} "
            f"ORDER BY d.seq {'DESC' if newest_first else 'ASC'} LIMIT ? OFFSET ?",
            (agent_id, room_id, *args, limit, offset),
        )
        return [(message_of(row[:10]), Delivery(*row[10:])) for row in rows]

    def count_deliveries(self, agent_id: str, room_id: str, status: str | None) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM deliveries d WHERE d.agent_id = ? AND d.room_id = ? "
            f"AND {STATUS_FILTERS[status]}",
            (agent_id, room_id),
        ).fetchone()
        return int(row[0])

    def context_page(
        self, agent_id: str, room_id: str, *, limit: int, after: int | None = None, offset: int = 0
    ) -> list[tuple[Message, Delivery | None]]:
        """The messages the agent sent or was sent in the room, oldest first, one page."""
        window, args = _window(after, None)
        rows = self._db.execute(
            f"SELECT {MSG_COLUMNS}, {_DELIVERY} FROM messages m "
            "LEFT JOIN deliveries d ON d.seq = m.seq AND d.agent_id = ? "
            f"WHERE m.room_id = ? AND (m.sender_id = ? OR d.agent_id IS NOT NULL){window} "
            "ORDER BY m.seq LIMIT ? OFFSET ?",
            (agent_id, room_id, agent_id, *args, limit, offset),
        ).fetchall()
        return [
            (message_of(row[:10]), None if row[10] is None else Delivery(*row[10:])) for row in rows
        ]

    def count_context(self, agent_id: str, room_id: str) -> int:
        row = self._db.execute(
            "SELECT COUNT(*) FROM messages m LEFT JOIN deliveries d ON d.seq = m.seq "
            "AND d.agent_id = ? WHERE m.room_id = ? "
            "AND (m.sender_id = ? OR d.agent_id IS NOT NULL)",
            (agent_id, room_id, agent_id),
        ).fetchone()
        return int(row[0])
