"""The two paginated message routes, `GET .../messages` and `GET .../context`, over
real loopback HTTP, against the rules band-client-rest 0.0.51 documents
(docs/reference/platform.md, "The agent routes as documented")."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from platform_client import room_path

from band_trio.platform import Platform

SUNSET = "Thu, 01 Oct 2026 00:00:00 GMT"


def assert_envelope(response: httpx2.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


async def listed(
    client: httpx2.AsyncClient, room: str, **params: Any
) -> tuple[list[str], dict[str, Any]]:
    response = await client.get(room_path(room, "/messages"), params=params)
    assert response.status_code == 200, response.text
    body = response.json()
    return [m["id"] for m in body["data"]], body["metadata"]


async def claim(client: httpx2.AsyncClient, room: str, message: str, then: str = "") -> None:
    mark = room_path(room, f"/messages/{message}")
    assert (await client.post(f"{mark}/processing")).status_code == 200
    if then == "processed":
        assert (await client.post(f"{mark}/processed")).status_code == 200
    elif then == "failed":
        assert (await client.post(f"{mark}/failed", json={"error": "x"})).status_code == 200


async def walk(client: httpx2.AsyncClient, room: str, **params: Any) -> list[str]:
    """Every id the cursor path hands out, page after page."""
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        page = {**params, **({} if cursor is None else {"cursor": cursor})}
        ids, meta = await listed(client, room, **page)
        seen += ids
        assert meta["has_more"] == (meta.get("next_cursor") is not None)
        if not meta["has_more"]:
            return seen
        cursor = meta["next_cursor"]
    raise AssertionError("the cursor never ended")


async def test_the_status_filter_picks_each_delivery_state(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    delivered, processing, processed, failed, retried = (
        platform.post_message(room, user, f"m{n}") for n in range(5)
    )
    await claim(client, room, processing)
    await claim(client, room, processed, "processed")
    await claim(client, room, failed, "failed")
    await claim(client, room, retried, "failed")
    await claim(client, room, retried)  # a failed message claimed again: a live attempt
    expected = {
        None: [delivered, processing, failed, retried],  # everything NOT processed
        "pending": [delivered, failed],  # untouched, or failed without a live attempt
        "processing": [processing, retried],
        "processed": [processed],
        "failed": [failed],
        "all": [delivered, processing, processed, failed, retried],
    }
    for status, ids in expected.items():
        got, meta = await listed(client, room, **({} if status is None else {"status": status}))
        assert got == ids, status
        assert meta.get("status_filter") == status


async def test_limit_defaults_to_20_and_is_at_most_100(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    posted = [platform.post_message(room, user, f"m{n}") for n in range(105)]
    ids, meta = await listed(client, room)
    assert ids == posted[:20] and meta["limit"] == 20 and meta["has_more"] is True
    ids, meta = await listed(client, room, limit=1000)
    assert ids == posted[:100] and meta["limit"] == 100
    for low in (0, -5):
        assert (await listed(client, room, limit=low))[1]["limit"] == 1
    assert await walk(client, room, limit=7) == posted  # every one once, in order
    assert await walk(client, room) == posted


async def test_sort_order_desc_walks_from_the_newest(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    posted = [platform.post_message(room, user, f"m{n}") for n in range(7)]
    await claim(client, room, posted[3], "processed")
    unprocessed = [m for m in posted if m != posted[3]]
    assert await walk(client, room, sort_order="desc", limit=2) == unprocessed[::-1]
    assert await walk(client, room, sort_order="asc", limit=2) == unprocessed
    assert await walk(client, room, sort_order="desc", status="all", limit=3) == posted[::-1]


async def test_page_and_page_size_are_deprecated_and_say_so_in_headers(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    posted = [platform.post_message(room, user, f"m{n}") for n in range(5)]
    first = await client.get(room_path(room, "/messages"), params={"page": 1, "page_size": 2})
    assert first.headers["deprecation"] == "true"
    assert first.headers["sunset"] == SUNSET
    body = first.json()
    assert [m["id"] for m in body["data"]] == posted[:2]
    assert body["metadata"] == {
        "has_more": True, "limit": 2, "page": 1, "page_size": 2, "total_count": 5,
        "total_pages": 3,
    }  # fmt: skip
    last = (await client.get(room_path(room, "/messages?page=3&page_size=2"))).json()
    assert [m["id"] for m in last["data"]] == posted[4:]
    assert last["metadata"]["has_more"] is False
    # page alone: the default page size, the deprecation headers all the same
    only_page = await client.get(room_path(room, "/messages"), params={"page": 1})
    assert only_page.headers["sunset"] == SUNSET
    assert only_page.json()["metadata"]["page_size"] == 20
    # the cursor path carries no deprecation
    cursor = await client.get(room_path(room, "/messages"), params={"limit": 2})
    assert "deprecation" not in cursor.headers and "sunset" not in cursor.headers


async def test_the_typescript_sdks_stale_message_query_gets_only_processing(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    """`@thenvoi/sdk` recovers stale messages with this exact query; the platform used
    to ignore all three parameters and hand it the `delivered` message too."""
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    stale = platform.post_message(room, user, "claimed, then the agent died")
    platform.post_message(room, user, "never claimed")
    await claim(client, room, stale)
    response = await client.get(room_path(room, "/messages?status=processing&page=1&page_size=50"))
    assert [m["id"] for m in response.json()["data"]] == [stale]
    assert response.json()["metadata"]["total_pages"] == 1
    assert response.headers["deprecation"] == "true"


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("status=done", 422, "validation_error"),
        ("sort_order=up", 422, "validation_error"),
        ("limit=ten", 400, "bad_request"),
        ("cursor=abc", 400, "bad_request"),
        ("page=x", 400, "bad_request"),
        ("page_size=1.5", 400, "bad_request"),
    ],
)
async def test_a_bad_query_parameter_is_an_error_envelope(
    platform: Platform, client: httpx2.AsyncClient, query: str, status: int, code: str
) -> None:
    room = platform.info.room_id or ""
    assert_envelope(await client.get(room_path(room, f"/messages?{query}")), status, code)
    assert platform.stats["errors"] == 0


async def test_context_is_oldest_first_with_a_cursor(
    platform: Platform, client: httpx2.AsyncClient
) -> None:
    room, user = platform.info.room_id or "", platform.info.user_id or ""
    posted = [platform.post_message(room, user, f"m{n}") for n in range(120)]
    first = (await client.get(room_path(room, "/context"))).json()
    assert [m["id"] for m in first["data"]] == posted[:50]  # the oldest page first
    assert first["metadata"]["limit"] == 50 and first["metadata"]["has_more"] is True
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000}
        if cursor is not None:
            params["cursor"] = cursor
        page = (await client.get(room_path(room, "/context"), params=params)).json()
        assert page["metadata"]["limit"] == 100
        seen += [m["id"] for m in page["data"]]
        if not page["metadata"]["has_more"]:
            assert "next_cursor" not in page["metadata"]
            break
        cursor = page["metadata"]["next_cursor"]
    assert seen == posted
    paged = (await client.get(room_path(room, "/context?page=3&page_size=50"))).json()
    assert [m["id"] for m in paged["data"]] == posted[100:]
    assert paged["metadata"]["total_pages"] == 3 and paged["metadata"]["has_more"] is False
