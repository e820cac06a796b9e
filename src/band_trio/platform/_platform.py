"""`Platform`: the state, the live sockets and the operations on them.

Every operation here is synchronous: it changes the store, queues the pushes
the change causes (never waiting on a socket), and wakes `wait_until`. The
REST routes, the admin routes and in-process callers (tests, the demo, the
benchmarks) all go through these methods, so they cannot disagree.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from msgspec import UNSET

from ..policy import PlatformPolicy
from ..server import Listening
from ..wire import (
    AgentControl,
    ParticipantAdded,
    ParticipantRemoved,
    RoomAdded,
    RoomDeleted,
    RoomRemoved,
)
from ..wire.admin import (
    AdminAgent,
    AdminLogEntry,
    AdminMessage,
    AdminRoom,
    AdminUser,
    ReadyInfo,
)
from ._checks import (
    DESCRIPTION_CHARS,
    KEY_CHARS,
    NAME_CHARS,
    REASON_CHARS,
    TITLE_CHARS,
    check_handle,
    check_text,
)
from ._faults import Faults
from ._hub import Hub
from ._ids import check_id
from ._log import Changes, RequestLog
from ._payloads import mention_of, message_created, participants_topic, room_payload, room_topic
from ._store import Agent, Message, Room, Store, User

if TYPE_CHECKING:
    from ._console import Console

__all__ = ["Platform"]

Mode = Literal["interrupt", "stop", "play"]
Scope = Literal["agent", "room"]

_EXECUTION_NS = uuid.UUID("5b1c2d9e-8f4a-4c1e-9a57-0b7a2c3d4e5f")


class Platform:
    """The embedded Band platform: use it in-process, or through its HTTP admin API.

    Unknown ids raise `LookupError`; invalid requests raise `ValueError`.
    """

    def __init__(self, store: Store, policy: PlatformPolicy | None = None) -> None:
        self.store = store
        self.policy = policy or PlatformPolicy()
        """The platform's own durations and counts."""
        self.changes = Changes()
        self.request_log = RequestLog(
            self.changes,
            entries=self.policy.log_entries,
            text_limit=self.policy.log_text_limit,
        )
        self.hub = Hub(self.request_log, self.changes, self.policy)
        self.faults = Faults(self.request_log, self.hub)
        """Fault injection (`_faults.Faults`): fail, hold or delay REST calls, drop or
        close sockets, refuse upgrades, mute heartbeats, push `supersede`."""
        self.working: dict[tuple[str, str], bool] = {}
        self.listening: Listening | None = None
        """The server, once it listens: its refusals and dropped clients are in `stats`."""
        self.console: Console | None = None
        """The browser console, when the server serves one: its streams are in `stats`."""
        self._info: ReadyInfo | None = None
        saved = store.get_meta("last_disconnects")
        try:
            found = msgspec.json.decode(saved or "{}", type=dict[str, tuple[str, str]])
        except msgspec.DecodeError:  # a hand-edited database: forget them, do not fail
            found = {}
        self.hub.last_disconnect.update(found)

    def save_disconnects(self) -> None:
        """Keep each agent's last disconnect across a restart (`--db`): the server calls
        this once its sockets are gone, the platform's own shutdown close among them."""
        self.store.set_meta(
            "last_disconnects", msgspec.json.encode(self.hub.last_disconnect).decode()
        )

    @property
    def info(self) -> ReadyInfo:
        """URLs to reach this platform (and the seeded ids when seeded)."""
        if self._info is None:
            raise RuntimeError("the platform is not serving")
        return self._info

    def serving(self, info: ReadyInfo | None) -> None:
        """Called by the server once it listens (and with None once it has stopped)."""
        self._info = info

    # -- observation ----------------------------------------------------------

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` is true, re-checking after every state change.

        The caller sets the deadline (`with trio.fail_after(...)`).
        """
        while not predicate():
            await self.changes.wait()

    def log(self, since: int = 0) -> list[AdminLogEntry]:
        return self.request_log.since(since)

    @property
    def stats(self) -> dict[str, int]:
        stats = dict(self.request_log.stats)
        stats["connections_live"] = len(self.hub.connections)
        stats["log_entries"] = len(self.request_log.entries)
        if self.listening is not None:
            for reason, count in self.listening.guard.refused.items():
                stats[f"refused_{reason}"] = count
            stats["clients_stalled"] = self.listening.stalled
        if self.console is not None:
            stats["console_streams"] = self.console.feeds.streams
            stats["console_states_built"] = self.console.feeds.builds
        return stats

    def connected_agents(self) -> set[str]:
        return set(self.hub.live)

    def messages(self, room_id: str) -> list[AdminMessage]:
        return [
            AdminMessage(
                id=m.id,
                sender_id=m.sender_id,
                sender_type=m.sender_type,
                content=m.content,
                message_type=m.message_type,
                inserted_at=m.inserted_at,
            )
            for m in self.store.messages(room_id)
        ]

    def delivery(self, message_id: str) -> dict[str, dict[str, Any]]:
        """`{agent_id: {"status": ..., "attempts": n}}` for every recipient."""
        message = self._message(message_id)
        return {
            agent_id: {"status": d.status, "attempts": d.attempts}
            for agent_id, d in self.store.deliveries(message.seq).items()
        }

    # -- agents, users, rooms -------------------------------------------------

    def create_agent(
        self,
        *,
        id: str | None = None,
        name: str | None = None,
        handle: str | None = None,
        description: str | None = None,
        api_key: str | None = None,
    ) -> AdminAgent:
        if id is not None:
            check_id("agent", id)
        check_text("name", name, NAME_CHARS)
        check_handle(handle)
        check_text("description", description, DESCRIPTION_CHARS)
        check_text("api_key", api_key, KEY_CHARS)
        agent = self.store.create_agent(
            id=id, name=name, handle=handle, description=description, api_key=api_key
        )
        self.changes.notify()
        return AdminAgent(
            id=agent.id,
            name=agent.name,
            handle=agent.handle,
            description=agent.description,
            api_key=agent.api_key,
        )

    def create_user(
        self, *, id: str | None = None, name: str | None = None, handle: str | None = None
    ) -> AdminUser:
        if id is not None:
            check_id("user", id)
        check_text("name", name, NAME_CHARS)
        check_handle(handle)
        user = self.store.create_user(id=id, name=name, handle=handle)
        self.changes.notify()
        return AdminUser(id=user.id, name=user.name, handle=user.handle)

    def create_room(
        self, title: str | None = None, participants: Iterable[str] = (), *, id: str | None = None
    ) -> AdminRoom:
        if id is not None:
            check_id("room", id)
        check_text("title", title, TITLE_CHARS)
        pids = list(dict.fromkeys(participants))
        for pid in pids:
            self._profile(pid)
        room = self.store.create_room(id=id, title=title)
        for pid in pids:
            self.add_participant(room.id, pid)
        return AdminRoom(id=room.id, title=room.title, participants=pids)

    def add_participant(self, room_id: str, pid: str) -> None:
        """Add `pid`; push `participant_added`, and `room_added` to an agent."""
        room = self._room(room_id)
        profile = self._profile(pid)
        if not self.store.add_participant(room_id, pid):
            return
        payload = ParticipantAdded(
            id=pid, type=self._type(profile), name=profile.name, handle=profile.handle
        )
        self.hub.broadcast(participants_topic(room_id), "participant_added", payload)
        if isinstance(profile, Agent):
            self.hub.push(pid, f"agent_rooms:{pid}", "room_added", room_payload(room, RoomAdded))
        self.changes.notify()

    def remove_participant(self, room_id: str, pid: str) -> None:
        """Remove `pid`; push `participant_removed`, and `room_removed` to an agent."""
        room = self._room(room_id)
        profile = self._profile(pid)
        if not self.store.remove_participant(room_id, pid):
            raise LookupError(f"{pid} is not a participant of room {room_id}")
        payload = ParticipantRemoved(
            id=pid, type=self._type(profile), name=profile.name, handle=profile.handle
        )
        self.hub.broadcast(participants_topic(room_id), "participant_removed", payload)
        if isinstance(profile, Agent):
            self.hub.push(
                pid, f"agent_rooms:{pid}", "room_removed", room_payload(room, RoomRemoved)
            )
            self.hub.forget(room_topic(room_id), pid)
            self.hub.forget(participants_topic(room_id), pid)
            self.working.pop((pid, room_id), None)
        self.changes.notify()

    def delete_room(self, room_id: str) -> None:
        """Delete a room and everything in it; push `room_deleted` to every joined agent."""
        self._room(room_id)
        self.hub.broadcast(participants_topic(room_id), "room_deleted", RoomDeleted(id=room_id))
        self.store.delete_room(room_id)
        self.hub.forget(room_topic(room_id))
        self.hub.forget(participants_topic(room_id))
        for key in [k for k in self.working if k[1] == room_id]:
            del self.working[key]
        self.changes.notify()

    # -- messages -------------------------------------------------------------

    def post_message(
        self,
        room_id: str,
        sender_id: str,
        content: str,
        mentions: Sequence[str] | None = None,
    ) -> str:
        """Post as any participant. Without `mentions`, every other agent in the room
        is a recipient; with them (participant ids), only the mentioned agents."""
        self._room(room_id)
        sender = self._profile(sender_id)
        members = self.store.participants(room_id)
        if sender_id not in members:
            raise LookupError(f"{sender_id} is not a participant of room {room_id}")
        if mentions is None:
            mentioned: list[Agent | User] = []
            recipients = [p for p in members if p != sender_id and p in self.store.agents]
        else:
            mentioned = []
            for pid in dict.fromkeys(mentions):
                if pid not in members:
                    raise ValueError(f"mentioned participant {pid} is not in room {room_id}")
                mentioned.append(self._profile(pid))
            recipients = [p.id for p in mentioned if isinstance(p, Agent) and p.id != sender_id]
        message = self.publish(room_id, sender, content, mentioned, recipients)
        return message.id

    def publish(
        self,
        room_id: str,
        sender: Agent | User,
        content: str,
        mentioned: Sequence[Agent | User],
        recipients: Sequence[str],
    ) -> Message:
        """Store a message, then push it to its recipients and echo it to an agent sender."""
        message = self.store.add_message(
            room_id,
            sender_id=sender.id,
            sender_type=self._type(sender),
            sender_name=sender.name,
            content=content,
            mentions=[mention_of(p) for p in mentioned],
            recipients=recipients,
        )
        payload = message_created(message)
        topic = room_topic(room_id)
        for agent_id in recipients:
            self.hub.push(agent_id, topic, "message_created", payload)
        if isinstance(sender, Agent) and sender.id not in recipients:
            self.hub.push(sender.id, topic, "message_created", payload)
        self.changes.notify()
        return message

    # -- controls -------------------------------------------------------------

    def send_control(
        self,
        agent_id: str,
        mode: Mode,
        *,
        room_id: str | None = None,
        scope: Scope | None = None,
        reason: str | None = None,
    ) -> str:
        """Apply and push an `agent.control`; return its fresh `correlation_id`.

        `stop` closes the gate for the room (or every room of the agent when
        `room_id` is None), `play` opens it, `interrupt` leaves it alone.
        """
        if agent_id not in self.store.agents:
            raise LookupError(f"no agent {agent_id}")
        if mode not in ("interrupt", "stop", "play"):
            raise ValueError(f"unknown control mode {mode!r}")
        check_text("reason", reason, REASON_CHARS)
        if room_id is not None:
            self._room(room_id)
        if mode == "stop":
            rooms = [room_id] if room_id else [r.id for r in self.store.rooms_of(agent_id)]
            self.store.stop(agent_id, rooms)
            for rid in rooms:
                self.working.pop((agent_id, rid), None)
        elif mode == "play":
            self.store.play(agent_id, room_id)
        correlation_id = f"ctl-{uuid.uuid4().hex}"
        payload = AgentControl(
            mode=mode,
            scope=scope or ("room" if room_id else "agent"),
            agent_id=agent_id,
            correlation_id=correlation_id,
            execution_id=str(uuid.uuid5(_EXECUTION_NS, f"{agent_id}:{room_id}")),
            room_id=room_id,
            reason=reason if reason is not None else UNSET,
            type="agent.control",
        )
        self.hub.push(agent_id, f"agent_control:{agent_id}", "agent.control", payload)
        self.changes.notify()
        return correlation_id

    # -- seeding --------------------------------------------------------------

    def seed(self) -> tuple[Agent, User, Room]:
        """A user, an agent and a room with both; created once per database."""
        ids = self.store.get_meta("seed")
        if ids is not None:
            agent_id, user_id, room_id = ids.split(",")
            room = self.store.room(room_id)
            if agent_id in self.store.agents and user_id in self.store.users and room:
                return self.store.agents[agent_id], self.store.users[user_id], room
        handles = self.store.handles  # a second seed (its room deleted) takes "alice-2"
        user = self.store.create_user(name="Alice", handle=handles.free("alice"))
        agent = self.store.create_agent(
            name="Demo Agent",
            handle=handles.free("demo-agent"),
            description="A demo agent on the band-trio embedded platform",
        )
        room = self.store.room(self.create_room("demo", [user.id, agent.id]).id or "")
        assert room is not None
        self.store.set_meta("seed", f"{agent.id},{user.id},{room.id}")
        return agent, user, room

    # -- helpers --------------------------------------------------------------

    def _room(self, room_id: str) -> Room:
        room = self.store.room(room_id)
        if room is None:
            raise LookupError(f"no room {room_id}")
        return room

    def _profile(self, pid: str) -> Agent | User:
        profile = self.store.profile(pid)
        if profile is None:
            raise LookupError(f"no agent or user {pid}")
        return profile

    def _message(self, message_id: str) -> Message:
        message = self.store.message(message_id)
        if message is None:
            raise LookupError(f"no message {message_id}")
        return message

    @staticmethod
    def _type(profile: Agent | User) -> str:
        return "Agent" if isinstance(profile, Agent) else "User"
