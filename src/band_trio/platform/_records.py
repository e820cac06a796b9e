"""The records the store hands out (frozen, so a cached one can be shared) and its schema."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["SCHEMA", "Agent", "Delivery", "Message", "Room", "User", "agent_fields", "now_iso"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents (
    id TEXT PRIMARY KEY, api_key TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
    handle TEXT NOT NULL, description TEXT NOT NULL, owner_uuid TEXT NOT NULL,
    inserted_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, handle TEXT NOT NULL, inserted_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rooms (
    id TEXT PRIMARY KEY, title TEXT, inserted_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS participants (
    room_id TEXT NOT NULL, pid TEXT NOT NULL, position INTEGER NOT NULL,
    PRIMARY KEY (room_id, pid));
CREATE INDEX IF NOT EXISTS participants_by_pid ON participants (pid, room_id);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, room_id TEXT NOT NULL,
    content TEXT NOT NULL, sender_id TEXT NOT NULL, sender_type TEXT NOT NULL,
    sender_name TEXT, message_type TEXT NOT NULL, mentions TEXT NOT NULL,
    inserted_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS messages_by_room ON messages (room_id, seq);
CREATE TABLE IF NOT EXISTS deliveries (
    seq INTEGER NOT NULL, agent_id TEXT NOT NULL, room_id TEXT NOT NULL,
    status TEXT NOT NULL, attempts INTEGER NOT NULL, current_attempt INTEGER NOT NULL,
    PRIMARY KEY (agent_id, seq));
CREATE INDEX IF NOT EXISTS deliveries_pending ON deliveries (agent_id, room_id, seq)
    WHERE status != 'processed';
CREATE INDEX IF NOT EXISTS deliveries_by_seq ON deliveries (seq);
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY, room_id TEXT NOT NULL, sender_id TEXT NOT NULL,
    content TEXT NOT NULL, message_type TEXT NOT NULL, metadata TEXT,
    inserted_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_room ON events (room_id);
CREATE TABLE IF NOT EXISTS stopped (
    agent_id TEXT NOT NULL, room_id TEXT NOT NULL, PRIMARY KEY (agent_id, room_id));
"""


def now_iso() -> str:
    """ISO-8601 UTC with a `Z`, as Band sends it (`datetime.fromisoformat` parses it)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    api_key: str
    name: str
    handle: str
    description: str
    owner_uuid: str
    inserted_at: str


@dataclass(frozen=True, slots=True)
class User:
    id: str
    name: str
    handle: str
    inserted_at: str


@dataclass(frozen=True, slots=True)
class Room:
    id: str
    title: str | None
    inserted_at: str


@dataclass(frozen=True, slots=True)
class Message:
    seq: int
    id: str
    room_id: str
    content: str
    sender_id: str
    sender_type: str
    sender_name: str | None
    message_type: str
    mentions: list[dict[str, Any]]
    inserted_at: str


@dataclass(frozen=True, slots=True)
class Delivery:
    """One recipient's view of one message."""

    status: str
    attempts: int
    current_attempt: int


def agent_fields(agent: Agent) -> list[str]:
    return [
        agent.id, agent.api_key, agent.name, agent.handle, agent.description,
        agent.owner_uuid, agent.inserted_at,
    ]  # fmt: skip
