"""The console's routes and its live stream, over real loopback sockets (no browser).

The stream is read the way a page reads it: server-sent events over one HTTP
response, each `state` event the whole state. Tests wait for the state they
expect, with a deadline; nothing is polled and nothing sleeps.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from urllib.parse import quote, urlencode

import httpx2
import pytest
import trio
import trio.testing

from band_trio import Policy
from band_trio.adapters import DemoAdapter
from band_trio.platform import Platform, open_platform
from band_trio.platform._store import Store
from band_trio.policy import PlatformPolicy
from support import running_agent, seeded, status

State = dict[str, Any]


def live_tasks() -> int:
    return trio.lowlevel.current_statistics().tasks_living


class _Chunked:
    """The body of one chunked HTTP/1.1 response, read off a raw socket, line by line.

    A hand-rolled reader rather than httpx2: an event stream is never read to
    its end, and httpx2 leaves its inner body generators unclosed when a
    response is abandoned early, which this suite turns into errors."""

    def __init__(self, sock: trio.SocketStream) -> None:
        self._sock = sock
        self._buffer = b""
        self._body = b""

    async def _fill(self) -> None:
        data = await self._sock.receive_some(65536)
        if not data:
            raise EOFError("the connection closed")
        self._buffer += data

    async def _raw_line(self) -> bytes:
        while b"\r\n" not in self._buffer:
            await self._fill()
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line

    async def head(self) -> tuple[int, dict[str, str]]:
        status = int((await self._raw_line()).split()[1])
        headers = {}
        while line := await self._raw_line():
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers

    async def line(self) -> str:
        while b"\n" not in self._body:
            size = int(await self._raw_line(), 16)
            if size == 0:
                raise EOFError("the stream ended")
            while len(self._buffer) < size + 2:
                await self._fill()
            self._body += self._buffer[:size]
            self._buffer = self._buffer[size + 2 :]
        line, self._body = self._body.split(b"\n", 1)
        return line.decode()


class Stream:
    """One open console stream: the states it has delivered, and a way to wait for one."""

    def __init__(self, body: _Chunked) -> None:
        self._body = body
        self.states: list[State] = []
        self.retry: int | None = None

    async def next_state(self) -> State:
        event = None
        while True:
            line = await self._body.line()
            if line.startswith("retry: "):
                self.retry = int(line[7:])
            elif line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "state":
                state: State = json.loads(line[6:])
                self.states.append(state)
                return state

    async def until(self, predicate: Callable[[State], bool], *, within: float = 10) -> State:
        with trio.fail_after(within):
            if self.states and predicate(self.states[-1]):
                return self.states[-1]
            while True:
                state = await self.next_state()
                if predicate(state):
                    return state


@asynccontextmanager
async def stream(client: httpx2.AsyncClient, room: str | None = None) -> AsyncIterator[Stream]:
    """The console's event stream, as a page opens it (on the client's server)."""
    url = client.base_url
    query = f"?{urlencode({'room': room})}" if room else ""
    sock = await trio.open_tcp_stream(url.host, url.port or 80)
    async with sock:
        request = (
            f"GET /_console/api/stream{query} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
            "Accept: text/event-stream\r\n\r\n"
        )
        await sock.send_all(request.encode())
        body = _Chunked(sock)
        status, headers = await body.head()
        assert status == 200
        assert headers["content-type"].startswith("text/event-stream")
        assert headers["transfer-encoding"] == "chunked"
        yield Stream(body)


def message(state: State, content: str) -> State | None:
    room = state["room"] or {}
    return next((m for m in room.get("messages", ()) if m["content"] == content), None)


def press_of(state: State, mode: str) -> State | None:
    return next((p for p in state["presses"] if p["mode"] == mode), None)


async def test_the_console_is_served_only_when_asked_for(platform: Platform) -> None:
    assert platform.info.console_url is None
    async with httpx2.AsyncClient(base_url=platform.info.rest_url) as client:
        response = await client.get("/_console/")
    assert response.status_code == 404


async def test_the_page_and_its_files_are_served_from_the_package(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    assert console.info.console_url == f"{console.info.rest_url}/_console/"
    page = await http.get("/_console/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/_console/console.js"' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # no CDN: works offline
    assert '<script src="/_console/questions.js"' in page.text
    files = [("console.js", "text/javascript"), ("questions.js", "text/javascript")]
    for name, kind in [*files, ("console.css", "text/css")]:
        response = await http.get(f"/_console/{name}")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith(kind)
        assert len(response.content) > 1000
    assert (await http.get("/_console/nope.js")).status_code == 404


async def test_the_stream_pushes_each_change_with_its_delivery_status(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, user_id = seeded(console)
    async with stream(http, room_id) as live:
        first = await live.next_state()
        assert live.retry == int(console.policy.console_reconnect * 1000)
        assert [r["id"] for r in first["rooms"]] == [room_id]
        assert first["user"]["id"] == user_id
        assert {p["id"] for p in first["room"]["participants"]} == {agent_id, user_id}
        assert first["agents"][0]["connected"] is False
        console.post_message(room_id, user_id, "is anyone there?")
        state = await live.until(lambda s: message(s, "is anyone there?") is not None)
        found = message(state, "is anyone there?")
        assert found is not None
        assert found["delivery"] == {agent_id: {"status": "delivered", "attempts": 0}}


async def test_a_reply_and_the_agent_state_arrive_live(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, _ = seeded(console)
    async with stream(http, room_id) as live:
        async with running_agent(console, DemoAdapter()):
            await live.until(lambda s: s["agents"][0]["connected"])
            await _hi(http, live, agent_id, room_id)
        state = await live.until(lambda s: not s["agents"][0]["connected"])
    assert state["agents"][0]["last_disconnect"]["reason"].startswith("closed by the agent")


async def _hi(http: httpx2.AsyncClient, live: Stream, agent_id: str, room_id: str) -> None:
    posted = await http.post(
        "/_console/api/messages", json={"room_id": room_id, "content": "hi @demo-agent"}
    )
    assert posted.status_code == 201
    assert posted.json()["mentions"] == [agent_id]
    state = await live.until(lambda s: message(s, "echo: hi @demo-agent") is not None)
    mine = message(state, "hi @demo-agent")
    assert mine is not None and mine["mentions"] == [agent_id]
    await live.until(
        lambda s: message(s, "hi @demo-agent")["delivery"][agent_id]["status"] == "processed"  # type: ignore[index]
    )


async def test_stop_then_play_are_timed_from_the_log(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, user_id = seeded(console)
    quick = Policy(shutdown_grace=0.2)  # the replayed turn is still running at the end
    async with stream(http, room_id) as live, running_agent(console, DemoAdapter(), policy=quick):
        held = console.post_message(room_id, user_id, "think long sleep=30")
        await console.wait_until(lambda: console.working.get((agent_id, room_id), False))
        pressed = await http.post(
            "/_console/api/control", json={"mode": "stop", "agent_id": agent_id, "room_id": room_id}
        )
        assert pressed.status_code == 202
        state = await live.until(lambda s: (press_of(s, "stop") or {}).get("state") == "done")
        stop = press_of(state, "stop")
        assert stop is not None and stop["delivered"] and stop["was_working"]
        assert stop["sent_ms"] is not None and stop["sent_ms"] >= 0
        assert stop["effects"]["working:false"] > 0
        assert status(console, held) == "processing"  # stop keeps the message
        participant = next(p for p in state["room"]["participants"] if p["id"] == agent_id)
        assert participant["stopped"] is True
        await http.post(
            "/_console/api/control", json={"mode": "play", "agent_id": agent_id, "room_id": room_id}
        )
        state = await live.until(lambda s: (press_of(s, "play") or {}).get("state") == "done")
        play = press_of(state, "play")
        assert play is not None
        assert 0 < play["effects"]["next"] <= play["effects"]["claimed"]
        assert status(console, held) == "processing"  # claimed again, being answered


async def test_an_interrupt_is_timed_to_the_processed_mark(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, user_id = seeded(console)
    async with stream(http, room_id) as live, running_agent(console, DemoAdapter()):
        dropped = console.post_message(room_id, user_id, "never mind sleep=30")
        await console.wait_until(lambda: console.working.get((agent_id, room_id), False))
        await http.post("/_console/api/control", json={"mode": "interrupt", "agent_id": agent_id})
        state = await live.until(lambda s: (press_of(s, "interrupt") or {}).get("state") == "done")
        interrupt = press_of(state, "interrupt")
        assert interrupt is not None and interrupt["room_id"] is None  # agent-wide
        assert interrupt["effects"]["working:false"] > 0
        assert interrupt["effects"]["processed"] > 0
        assert status(console, dropped) == "processed"


async def test_a_press_that_has_no_effect_times_out_with_a_reason() -> None:
    policy = PlatformPolicy(console_press_window=0.3)
    async with (
        open_platform(seed=True, console=True, policy=policy) as console,
        httpx2.AsyncClient(base_url=console.info.rest_url) as http,
    ):
        agent_id, room_id, _ = seeded(console)
        async with stream(http, room_id) as live:
            await live.next_state()
            body = {"mode": "stop", "agent_id": agent_id, "room_id": room_id}
            await http.post("/_console/api/control", json=body)
            # Nothing else changes: the stream itself wakes when the press expires.
            state = await live.until(
                lambda s: (press_of(s, "stop") or {}).get("state") == "timed out"
            )
    stop = press_of(state, "stop")
    assert stop is not None and stop["delivered"] is False
    assert "not connected" in stop["note"]


@pytest.mark.parametrize(
    ("path", "body", "code", "words"),
    [
        ("messages", {"room_id": "ROOM", "content": "   "}, 422, "message is empty"),
        ("messages", {"room_id": "nope", "content": "hi"}, 404, "There is no room nope"),
        ("messages", {"room_id": "ROOM"}, 422, "content"),
        ("messages", {"room_id": "ROOM", "content": "hi", "extra": 1}, 422, "extra"),
        ("rooms", {"title": "x", "agents": ["ghost"]}, 404, "There is no agent ghost"),
        ("rooms", {"title": "t" * 201}, 422, "at most 200 characters"),
        ("rooms", {"title": 7}, 422, "title"),
        ("rooms/nope/participants", {"id": "AGENT"}, 404, "There is no room nope"),
        ("rooms/ROOM/participants", {"id": "USER"}, 404, "There is no agent"),
        ("control", {"mode": "pause", "agent_id": "AGENT"}, 422, "mode"),
        ("control", {"mode": "stop", "agent_id": "ghost"}, 404, "There is no agent ghost"),
        ("control", {"mode": "stop", "agent_id": "AGENT", "room_id": "nope"}, 404, "no room"),
        ("control", {"mode": "stop", "agent_id": "AGENT", "reason": "r" * 1001}, 422, "1000"),
        ("nothing", {}, 404, "The console has no POST"),
    ],
)
async def test_bad_input_is_answered_with_a_message_for_a_person(
    console: Platform,
    http: httpx2.AsyncClient,
    path: str,
    body: dict[str, Any],
    code: int,
    words: str,
) -> None:
    agent_id, room_id, user_id = seeded(console)
    ids = {"ROOM": room_id, "AGENT": agent_id, "USER": user_id}
    text = json.dumps(body)
    for name, value in ids.items():
        text, path = text.replace(name, value), path.replace(name, value)
    before = len(console.messages(room_id))
    response = await http.post(f"/_console/api/{path}", content=text)
    assert response.status_code == code
    error = response.json()["error"]
    assert words in error["message"], error
    assert "Traceback" not in response.text
    assert len(console.messages(room_id)) == before


async def test_hostile_bodies_are_refused_without_harm(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    _, room_id, _ = seeded(console)
    nested = await http.post("/_console/api/messages", content="[" * 100_000)
    assert nested.status_code == 422
    assert nested.json()["error"]["message"].startswith("That request is not valid")
    broken = await http.post("/_console/api/messages", content=b"\xff{")
    assert broken.status_code == 400
    assert broken.json()["error"]["message"] == "That request is not JSON."
    huge = b'{"room_id": "x", "content": "' + b"a" * console.policy.max_request_body + b'"}'
    json_body = {"content-type": "application/json"}
    async with httpx2.AsyncClient(base_url=console.info.rest_url, headers=json_body) as other:
        too_big = await other.post("/_console/api/messages", content=huge)
    assert too_big.status_code == 413
    odd = "room/../../_admin?x=<script>"
    response = await http.post(
        "/_console/api/messages", json={"room_id": odd, "content": "<b>hi</b>"}
    )
    assert response.status_code == 404
    assert console.messages(room_id) == []


async def test_a_room_made_in_the_console_gets_the_user_and_the_agents(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, _, user_id = seeded(console)
    other = console.create_agent(name="Second", handle="second")
    made = await http.post(
        "/_console/api/rooms", json={"title": " planning ", "agents": [agent_id]}
    )
    assert made.status_code == 201
    room_id = made.json()["id"]
    assert made.json()["title"] == "planning"
    assert console.store.participants(room_id) == [user_id, agent_id]
    added = await http.post(f"/_console/api/rooms/{room_id}/participants", json={"id": other.id})
    assert added.status_code == 200
    assert added.json()["participants"] == [user_id, agent_id, other.id]
    posted = await http.post(
        "/_console/api/messages", json={"room_id": room_id, "content": "only you @second"}
    )
    assert posted.json()["mentions"] == [other.id]
    message_id = posted.json()["id"]
    assert set(console.delivery(message_id)) == {other.id}  # a mention narrows the recipients


async def test_an_unknown_room_is_shown_as_an_error_in_the_state(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    async with stream(http, "no-such-room") as live:
        state = await live.next_state()
    assert state["room"] == {
        "id": "no-such-room",
        "error": "There is no room no-such-room (deleted, or never made).",
    }


async def test_the_state_is_bounded() -> None:
    policy = PlatformPolicy(console_rooms=2, console_messages=3, console_message_chars=10)
    async with (
        open_platform(seed=True, console=True, policy=policy) as console,
        httpx2.AsyncClient(base_url=console.info.rest_url) as http,
    ):
        _, room_id, user_id = seeded(console)
        for title in ("b", "c"):
            console.create_room(title, [user_id])
        for n in range(4):
            console.post_message(room_id, user_id, f"m{n}")
        console.post_message(room_id, user_id, "x" * 100_000)
        key = {"X-API-Key": console.info.api_key or ""}
        agent_name = console.store.agents[console.info.agent_id or ""].name
        for content in ("e0", "e1", "e2", "y" * 5_000):  # a turn's errors, thoughts, ...
            event = {"event": {"content": content, "message_type": "error"}}
            posted = await http.post(
                f"/api/v1/agent/chats/{room_id}/events", json=event, headers=key
            )
            assert posted.status_code == 201
        async with stream(http, room_id) as live:
            state = await live.next_state()
    assert len(state["rooms"]) == 2 and state["rooms_total"] == 3
    shown = [m["content"] for m in state["room"]["messages"]]
    assert shown == ["m2", "m3", "xxxxxxxxxx… [100,000 characters]"]
    assert state["room"]["messages_total"] == 5
    events = state["room"]["events"]
    assert [e["content"] for e in events] == ["e1", "e2", "yyyyyyyyyy… [5,000 characters]"]
    assert state["room"]["events_total"] == 4
    assert {e["message_type"] for e in events} == {"error"}
    assert {e["sender_name"] for e in events} == {agent_name}


async def test_an_unseeded_platform_makes_a_console_user_once(tmp_path: Any) -> None:
    db = tmp_path / "console.db"
    for run in range(2):
        async with (
            open_platform(seed=False, console=True, db=db) as console,
            httpx2.AsyncClient(base_url=console.info.rest_url) as http,
        ):
            if run == 0:  # the database keeps it (and its handle) for the second run
                console.create_agent(id="solo", name="Solo", handle="solo")
            made = await http.post("/_console/api/rooms", json={"agents": ["solo"]})
            assert made.status_code == 201
    async with open_platform(seed=False, db=db) as console:
        users = list(console.store.users.values())
    assert [u.handle for u in users] == ["you"]


async def test_disconnect_reasons_are_shown_per_agent(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, _ = seeded(console)
    async with stream(http, room_id) as live, running_agent(console, DemoAdapter()):
        await live.until(lambda s: s["agents"][0]["connected"])
        assert console.faults.close_socket(agent_id, 4000, "maintenance")
        state = await live.until(lambda s: s["agents"][0]["last_disconnect"] is not None)
        assert state["agents"][0]["last_disconnect"]["reason"] == (
            "closed by the platform: 4000 maintenance"
        )
        await live.until(lambda s: s["agents"][0]["connected"])  # it reconnects by itself
        assert console.faults.drop_socket(agent_id)
        state = await live.until(
            lambda s: (
                "fault injection" in (s["agents"][0]["last_disconnect"] or {}).get("reason", "")
            )
        )


async def test_streams_end_when_the_page_goes_and_when_the_platform_stops() -> None:
    # A long request grace: if an open stream held the shutdown, it would hold it 30 s.
    policy = PlatformPolicy(request_grace=30, shutdown_deadline=60)
    baseline = live_tasks()
    async with AsyncExitStack() as outlives_the_platform:
        with trio.fail_after(10):  # all of it, the shutdown included: well inside the grace
            async with open_platform(seed=True, console=True, policy=policy) as console:
                http = httpx2.AsyncClient(base_url=console.info.rest_url)
                await outlives_the_platform.enter_async_context(http)
                await trio.testing.wait_all_tasks_blocked()
                serving = live_tasks()
                for _ in range(3):  # a page opened and closed: its stream's tasks go with it
                    async with stream(http) as live:
                        await live.next_state()
                await trio.testing.wait_all_tasks_blocked()
                assert live_tasks() == serving
                live = await outlives_the_platform.enter_async_context(stream(http))
                await live.next_state()
                assert live_tasks() > serving
        with pytest.raises(EOFError, match="the stream ended"):  # ended, not cut
            await live.next_state()
    assert live_tasks() == baseline


async def test_a_room_press_counts_only_that_rooms_effects(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, room_id, user_id = seeded(console)
    other = console.create_room("other", [user_id, agent_id]).id
    assert other is not None
    quick = Policy(shutdown_grace=0.2)
    async with stream(http, room_id) as live, running_agent(console, DemoAdapter(), policy=quick):
        busy = console.post_message(other, user_id, "busy elsewhere sleep=30")
        await console.wait_until(lambda: console.working.get((agent_id, other), False))
        body = {"mode": "stop", "agent_id": agent_id, "room_id": room_id}
        await http.post("/_console/api/control", json=body)
        await live.until(lambda s: (press_of(s, "stop") or {}).get("sent_ms") is not None)
        # The other room's turn ends (not through the console): its marks are not ours.
        console.send_control(agent_id, "interrupt", room_id=other)
        await console.wait_until(lambda: status(console, busy) == "processed")
        await console.wait_until(lambda: not console.working.get((agent_id, other), True))
        console.post_message(room_id, user_id, "a change after the other room's marks")
        state = await live.until(
            lambda s: message(s, "a change after the other room's marks") is not None
        )
    stop = press_of(state, "stop")
    assert stop is not None and stop["effects"] == {}
    assert stop["state"] == "waiting" and stop["was_working"] is False


def test_the_press_book_reads_the_log_once_and_says_when_it_lost_entries() -> None:
    from band_trio.platform._console_presses import PressBook
    from band_trio.platform._log import Changes, RequestLog

    log = RequestLog(Changes(), entries=4)
    book = PressBook(log, keep=2, window=60)
    press = book.add(
        "interrupt", "a1", "r1", delivered=True, was_working=True, correlation_id="ctl-1"
    )
    t = press.pressed
    rest = "/api/v1/agent/chats/{room}/{tail}"
    log.append("ws_out", t + 0.001, agent_id="a1", frame='[..."ctl-1"...]')
    log.append(
        "rest",
        t + 0.002,
        agent_id="a2",
        method="POST",
        status=200,
        path=rest.format(room="r1", tail="messages/m1/processed"),
    )  # another agent
    log.append(
        "rest",
        t + 0.003,
        agent_id="a1",
        method="POST",
        status=409,
        path=rest.format(room="r1", tail="messages/m1/processed"),
    )  # refused: no effect
    log.append(
        "rest",
        t + 0.004,
        agent_id="a1",
        method="POST",
        status=200,
        path=rest.format(room="r1", tail="messages/m1/processed"),
    )
    [view] = book.views()
    assert view["sent_ms"] == 1.0 and view["effects"] == {"processed": 3.0}
    assert view["state"] == "waiting" and view["note"] is None
    for n in range(6):  # more than the ring holds, before the next read
        log.append("note", t + 0.01 + n)
    log.append(
        "rest",
        t + 0.1,
        agent_id="a1",
        method="POST",
        status=200,
        path=rest.format(room="r1", tail="activity"),
        body='{"working": false}',
    )
    [view] = book.views()
    assert view["effects"] == {"processed": 3.0, "working:false": 99.0}
    assert "dropped entries" in view["note"]
    for _ in range(3):  # the book keeps its newest presses only
        book.add("stop", "a1", None, delivered=False, was_working=False, correlation_id="x")
    assert [v["mode"] for v in book.views()] == ["stop", "stop"]


async def test_last_disconnects_outlive_a_restart_and_a_bad_record_is_forgotten(
    tmp_path: Any,
) -> None:
    db = tmp_path / "platform.db"
    async with open_platform(seed=True, db=db) as first:
        agent_id, _, _ = seeded(first)
        async with running_agent(first, DemoAdapter()):
            pass
        await first.wait_until(lambda: agent_id in first.hub.last_disconnect)
    async with open_platform(seed=True, db=db) as second:
        assert second.hub.last_disconnect[agent_id][1].startswith("closed by the agent")
    for bad in ('{"x": [1, 2, 3]}', "not json"):  # a hand-edited database
        store = Store(str(db))
        store.set_meta("last_disconnects", bad)
        store.close()
        async with open_platform(seed=True, db=db) as again:
            assert again.hub.last_disconnect == {}


async def test_a_room_id_with_odd_characters_works_everywhere(
    console: Platform, http: httpx2.AsyncClient
) -> None:
    agent_id, _, user_id = seeded(console)
    odd = "r ?#%&=+ü.."
    console.create_room("odd", [user_id], id=odd)
    added = await http.post(
        f"/_console/api/rooms/{quote(odd, safe='')}/participants", json={"id": agent_id}
    )
    assert added.status_code == 200, added.text
    posted = await http.post("/_console/api/messages", json={"room_id": odd, "content": "hi"})
    assert posted.status_code == 201
    async with stream(http, odd) as live:
        state = await live.until(lambda s: message(s, "hi") is not None)
    assert state["room"]["id"] == odd
    assert {p["id"] for p in state["room"]["participants"]} == {user_id, agent_id}
