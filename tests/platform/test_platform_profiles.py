"""Agents' and users' profiles: a handle names one participant, and every text is bounded.

The console sends `@handle` to the participant with that handle, so two with
one handle would send a mention to either (issue 38, item 7a).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from band_trio.platform import Platform, open_platform
from band_trio.platform._store import Store


@pytest.fixture
async def admin(platform: Platform) -> AsyncIterator[httpx2.AsyncClient]:
    json_body = {"content-type": "application/json"}
    async with httpx2.AsyncClient(base_url=platform.info.admin_url, headers=json_body) as c:
        yield c


def refused(response: httpx2.Response, says: str) -> None:
    assert response.status_code == 422, response.text
    assert says in response.json()["error"]["message"], response.text


async def test_a_handle_already_taken_is_refused(
    platform: Platform, admin: httpx2.AsyncClient
) -> None:
    agents = len(platform.store.agents)
    assert (await admin.post("/agents", json={"handle": "bot"})).status_code == 201
    for path, handle in (
        ("/agents", "bot"),
        ("/agents", "BOT"),  # the console matches @handle without case
        ("/agents", "\uff42\uff4f\uff54"),  # fullwidth: the same handle to a reader
        ("/users", "bot"),  # users and agents share the @ namespace
        ("/agents", "alice"),  # the seeded user's
        ("/users", "demo-agent"),  # the seeded agent's
    ):
        refused(await admin.post(path, json={"handle": handle}), "is taken")
    assert len(platform.store.agents) == agents + 1
    with pytest.raises(ValueError, match="is taken"):
        platform.create_agent(handle="Bot")


async def test_default_handles_never_collide(platform: Platform) -> None:
    """The default is made from the id's first 8 characters, which two ids may share."""
    first = platform.create_agent(id="agent-one-a")
    second = platform.create_agent(id="agent-one-b")
    user = platform.create_user(id="agent-one-c")
    handles = {first.handle, second.handle, user.handle}
    assert len({h.casefold() for h in handles if h}) == 3
    platform.create_agent(handle="agent-x")
    taken = platform.create_agent(id="x")  # its default would be "agent-x"
    assert taken.handle != "agent-x"
    odd = platform.create_agent(id="a b#c?d")  # a handle is one word, a default too
    assert odd.handle == "agent-a-b-c-d"


async def test_the_console_user_takes_a_free_handle(tmp_path: Path) -> None:
    """An agent made before the console named itself "you": the console still starts."""
    db = tmp_path / "platform.db"
    async with open_platform(seed=False, db=db) as platform:
        platform.create_agent(name="You", handle="you")
    async with open_platform(seed=False, db=db, console=True) as platform:
        store = platform.store
        handles = [p.handle for p in (*store.agents.values(), *store.users.values())]
    assert sorted(handles) == ["you", "you-2"]


def test_a_reseed_does_not_clash_with_the_first_seed(tmp_path: Path) -> None:
    """The seed is made again when its room was deleted; its handles are taken then."""
    store = Store(str(tmp_path / "platform.db"))
    platform = Platform(store)
    _, _, room = platform.seed()
    platform.delete_room(room.id)
    agent, user, again = platform.seed()
    assert again.id != room.id and {agent.handle, user.handle} == {"demo-agent-2", "alice-2"}
    handles = [p.handle.casefold() for p in (*store.agents.values(), *store.users.values())]
    assert len(handles) == len(set(handles)) == 4
    store.close()


def test_handles_stay_unique_across_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "platform.db")
    store = Store(path)
    store.create_agent(handle="bot")
    store.close()
    store = Store(path)
    with pytest.raises(ValueError, match="is taken"):
        store.create_user(handle="Bot")
    store.close()


LIMITS = [
    ("/agents", "name", 100),
    ("/agents", "handle", 64),
    ("/agents", "description", 1000),
    ("/agents", "api_key", 256),
    ("/users", "name", 100),
    ("/users", "handle", 64),
    ("/rooms", "title", 200),
]
"""(route, field, characters): every text a profile or a room keeps, and the console
streams to each page on every change (a 7 MB name once sent 306 MB down one stream)."""


@pytest.mark.parametrize(("path", "field", "chars"), LIMITS)
async def test_profile_texts_are_capped(
    admin: httpx2.AsyncClient, path: str, field: str, chars: int
) -> None:
    at_cap = await admin.post(path, json={field: "h" * chars})
    assert at_cap.status_code == 201, at_cap.text
    over = await admin.post(path, json={field: "k" * (chars + 1)})
    refused(over, f"{field} is at most {chars} characters")
    huge = await admin.post(path, json={field: "m" * 7_000_000})
    refused(huge, f"{field} is at most {chars} characters")


async def test_a_control_reason_is_capped(platform: Platform, admin: httpx2.AsyncClient) -> None:
    control = {"agent_id": platform.info.agent_id, "mode": "interrupt"}
    assert (await admin.post("/control", json={**control, "reason": "r" * 1000})).status_code == 200
    over = await admin.post("/control", json={**control, "reason": "r" * 1001})
    refused(over, "reason is at most 1000 characters")


@pytest.mark.parametrize("bad", ["two words", "@bot", "a/b", "\u200b", "x\u202ey", ""], ids=ascii)
async def test_a_handle_is_one_word_the_console_can_mention(
    platform: Platform, admin: httpx2.AsyncClient, bad: str
) -> None:
    """`@handle` in the console is letters, digits, `_`, `.` and `-`: any other
    handle could never be mentioned there."""
    if bad:
        refused(await admin.post("/agents", json={"handle": bad}), "handle")
    else:  # empty: the default, as when no handle is given
        made = await admin.post("/agents", json={"handle": bad})
        assert made.json()["handle"].startswith("agent-")
    assert (await admin.post("/agents", json={"handle": "Zoë.b_2-x"})).status_code == 201


def test_the_in_process_methods_apply_the_same_caps() -> None:
    platform = Platform(Store(None))
    with pytest.raises(ValueError, match="name is at most 100 characters"):
        platform.create_agent(name="n" * 101)
    with pytest.raises(ValueError, match="title is at most 200 characters"):
        platform.create_room("t" * 201)
    with pytest.raises(ValueError, match="handle is at most 64 characters"):
        platform.create_user(handle="u" * 65)
    assert not platform.store.agents and not platform.store.users and not platform.store.rooms(9)[0]
