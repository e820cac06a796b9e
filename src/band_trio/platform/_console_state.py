"""What a console page shows, as one JSON-ready value built from the platform's state.

A page is sent the whole of it on every change (coalesced by the stream), not
a diff: a page that reconnects after a restart, or that missed a push, is
whole again with the next state, and there is no client-side merge to get
wrong. It stays small because it is bounded: the newest
`console_messages` messages of the selected room and as many of its events (a
failed turn's error, a bridge's "Not forwarded", thoughts and tool calls), the
first `console_rooms` rooms and agents, the last `console_presses` presses.

An agent's question (`Turn.ask`) among those messages carries a `question`: its
text, choices, who may answer (and whether the console's user may), and what
became of it (`_console_questions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._console_questions import Asked, StopMemory, read_questions
from ._platform import Platform
from ._records import Delivery, Message
from ._store import Agent

__all__ = ["console_user", "room_questions", "snapshot"]


def console_user(p: Platform) -> str:
    """The user a console posts as: the seeded one, else one made for the console."""
    info = p.info
    if info.user_id is not None and info.user_id in p.store.users:
        return info.user_id
    made = p.store.get_meta("console_user")
    if made is not None and made in p.store.users:
        return made
    user = p.create_user(name="Console user", handle=p.store.handles.free("you"))
    p.store.set_meta("console_user", user.id or "")
    return user.id or ""


def _agent(p: Platform, agent: Agent) -> dict[str, Any]:
    when, why = p.hub.last_disconnect.get(agent.id, (None, None))
    return {
        "id": agent.id,
        "name": agent.name,
        "handle": agent.handle,
        "connected": agent.id in p.hub.live,
        "last_disconnect": None if why is None else {"at": when, "reason": why},
    }


def _participant(p: Platform, room_id: str, pid: str) -> dict[str, Any]:
    profile = p.store.profile(pid)
    if isinstance(profile, Agent):
        view = _agent(p, profile)
        view["type"] = "Agent"
        view["working"] = p.working.get((pid, room_id), False)
        view["stopped"] = p.store.is_stopped(pid, room_id)
        return view
    return {
        "id": pid,
        "type": "User",
        "name": profile.name if profile else pid,
        "handle": profile.handle if profile else None,
    }


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else f"{text[:chars]}… [{len(text):,} characters]"


def room_questions(
    p: Platform,
    room_id: str,
    messages: Sequence[Message],
    deliveries: Mapping[int, Mapping[str, Delivery]],
    memory: StopMemory,
) -> dict[str, Asked]:
    """The questions among the room's `messages`, as its cards show them."""
    stopped = {pid for pid in p.store.participants(room_id) if p.store.is_stopped(pid, room_id)}
    return read_questions(messages, deliveries, stopped, memory)


def _question(p: Platform, asked: Asked, user_id: str, chars: int) -> dict[str, Any]:
    agent = p.store.profile(asked.agent_id)
    return {
        "id": asked.qid,
        "agent_handle": agent.handle if agent is not None else None,
        "text": _cut(asked.text, chars),
        "choices": list(asked.choices),
        "anyone": asked.anyone,
        "answerers": [{"id": pid, "name": _name(p, pid)} for pid in asked.answerers],
        "may_answer": asked.may_answer(user_id, "User"),
        "state": asked.state.value,
        "choice": asked.choice,
        "answered_by": None
        if asked.answered_by is None
        else {"id": asked.answered_by, "name": _name(p, asked.answered_by)},
        "answer_id": asked.answer_id,
        "reason": None if asked.reason is None else _cut(asked.reason, chars),
        "superseded_by": asked.superseded_by,
    }


def _room(p: Platform, room_id: str, user_id: str, memory: StopMemory) -> dict[str, Any]:
    room = p.store.room(room_id)
    if room is None:
        return {"id": room_id, "error": f"There is no room {room_id} (deleted, or never made)."}
    limit, chars = p.policy.console_messages, p.policy.console_message_chars
    messages, total = p.store.recent_messages(room_id, limit)
    deliveries = p.store.deliveries_from(room_id, messages[0].seq) if messages else {}
    events, events_total = p.store.recent_events(room_id, limit)  # errors, thoughts, ...
    questions = room_questions(p, room_id, messages, deliveries, memory)
    return {
        "id": room.id,
        "title": room.title,
        "participants": [_participant(p, room_id, pid) for pid in p.store.participants(room_id)],
        "messages": [
            {
                "id": m.id,
                "sender_id": m.sender_id,
                "sender_name": m.sender_name,
                "sender_type": m.sender_type,
                "content": _cut(m.content, chars),
                "message_type": m.message_type,
                "mentions": [mention.get("id") for mention in m.mentions],
                "inserted_at": m.inserted_at,
                "delivery": {
                    agent_id: {"status": d.status, "attempts": d.attempts}
                    for agent_id, d in deliveries.get(m.seq, {}).items()
                },
                "question": None
                if m.id not in questions
                else _question(p, questions[m.id], user_id, chars),
            }
            for m in messages
        ],
        "messages_total": total,
        "events": [
            {
                "id": e["id"],
                "sender_id": e["sender_id"],
                "sender_name": _name(p, e["sender_id"]),
                "content": _cut(e["content"], chars),
                "message_type": e["message_type"],
                "inserted_at": e["inserted_at"],
            }
            for e in events
        ],
        "events_total": events_total,
    }


def _name(p: Platform, participant_id: str) -> str:
    profile = p.store.profile(participant_id)
    return profile.name if profile is not None and profile.name else participant_id


def _room_row(p: Platform, room_id: str, title: str | None) -> dict[str, Any]:
    """A room as the list shows it: its title, its participants, and how many of its
    agents are stopped there (a stop outlives the room's panel and the agent's run)."""
    members = p.store.participants(room_id)
    stopped = sum(1 for pid in members if p.store.is_stopped(pid, room_id))
    return {"id": room_id, "title": title, "participants": len(members), "stopped": stopped}


def snapshot(
    p: Platform,
    user_id: str,
    room_id: str | None,
    presses: list[dict[str, Any]],
    memory: StopMemory,
) -> dict[str, Any]:
    """The state a console shows to `user_id` with `room_id` selected (None: no room);
    `memory`: the console's questions withdrawn by a stop."""
    limit = p.policy.console_rooms
    rooms, rooms_total = p.store.rooms(limit)
    agents = list(p.store.agents.values())
    user = p.store.users[user_id]
    return {
        "user": {"id": user.id, "name": user.name, "handle": user.handle},
        "rooms": [_room_row(p, r.id, r.title) for r in rooms],
        "rooms_total": rooms_total,
        "agents": [_agent(p, a) for a in agents[:limit]],
        "agents_total": len(agents),
        "room": None if room_id is None else _room(p, room_id, user_id, memory),
        "presses": presses,
    }
