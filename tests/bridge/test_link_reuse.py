"""The runtime's link drives rooms other than the agent's own (`runtime.parts`).

The bridge reuses the link through the `LinkedRooms` protocol and a tap; this
proves that seam on its own: no adapter, a recording room set, every push seen
by the tap after routing, and a control signal routed to the room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import trio

from band_trio import Policy
from band_trio.link import RestClient, Socket, SocketStats
from band_trio.platform import Platform
from band_trio.runtime.parts import Changes, ControlLane, Inbound, Link, LinkSettings
from band_trio.wire import RefCounter


class _Room:
    def __init__(self, room_id: str, joined: trio.Event) -> None:
        self.id = room_id
        self._joined = joined
        self.signalled = trio.Event()
        self.signals: list[str] = []

    def joined(self, socket: Socket) -> None:
        self._joined.set()

    def push(self, item: Inbound) -> None:
        pass

    def interrupt(self, reason: str | None) -> bool:
        self.signals.append("interrupt")
        self.signalled.set()
        return False

    def stop(self, reason: str | None) -> None:
        self.signals.append("stop")

    def play(self) -> None:
        self.signals.append("play")


class _Rooms:
    def __init__(self) -> None:
        self.rooms: dict[str, _Room] = {}
        self.joined = trio.Event()

    @property
    def current(self) -> Mapping[str, _Room]:
        return self.rooms

    def get(self, room_id: str) -> _Room | None:
        return self.rooms.get(room_id)

    def add(self, room_id: str) -> _Room | None:
        if room_id in self.rooms:
            return None
        room = self.rooms[room_id] = _Room(room_id, self.joined)
        return room

    def remove(self, room_id: str, why: str) -> None:
        self.rooms.pop(room_id, None)

    def reconcile(self, wanted: Iterable[str]) -> None:
        for room_id in wanted:
            self.add(room_id)


async def test_a_link_with_no_adapter_serves_any_rooms_and_shows_pushes_to_its_tap(
    platform: Platform,
) -> None:
    info = platform.info
    assert info.agent_id and info.api_key and info.room_id and info.user_id
    policy = Policy()
    rooms = _Rooms()
    seen: list[tuple[str, str, Any]] = []
    arrived = trio.Event()

    def tap(topic: str, event: str, payload: Any) -> None:
        seen.append((topic, event, payload))
        if event == "message_created":
            arrived.set()

    changes = Changes()
    async with RestClient(info.rest_url, info.api_key, policy=policy) as rest:
        link = Link(
            LinkSettings(info.agent_id, info.api_key, info.ws_url),
            rest=rest,
            adapter=None,
            rooms=rooms,
            control=ControlLane(memory=16, changes=changes),
            policy=policy,
            stats=SocketStats(),
            refs=RefCounter(),
            changes=changes,
            tap=tap,
        )
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(link.run)
                await rooms.joined.wait()
                platform.post_message(info.room_id, info.user_id, "hello")
                await arrived.wait()
                platform.send_control(info.agent_id, "interrupt", room_id=info.room_id)
                await rooms.rooms[info.room_id].signalled.wait()
                link.close()
    assert rooms.rooms[info.room_id].signals == ["interrupt"]
    events = [event for _, event, _ in seen]
    assert "message_created" in events and "agent.control" in events
