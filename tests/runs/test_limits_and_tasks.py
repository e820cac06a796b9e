"""What the server refuses (413, 429, unknown routes and methods), and what it leaves
behind: 200 runs started and stopped leave no task, and neither does the server."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path

import httpx2
import trio

from band_trio.runs import RunsPolicy

from .conftest import DEADLINE, Scripted, serve


async def test_an_oversized_body_is_413_unread(scripted: Scripted) -> None:
    policy = RunsPolicy(max_body=1024)
    async with serve(scripted, policy) as api:
        response = await api.client.post("/v1/runs", json={"input": "x" * 2000})
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"
        assert response.headers["connection"] == "close"

        async def chunked() -> object:  # no content-length: counted as it is read
            for _ in range(4):
                yield b"x" * 512

        response = await api.client.post("/v1/runs", content=chunked())
        assert response.status_code == 413
        assert api.service.runs == {}
        assert (await api.client.post("/v1/runs", json={"input": "fits"})).status_code == 202


async def test_over_the_concurrent_run_limit_is_429(scripted: Scripted) -> None:
    policy = RunsPolicy(max_concurrent_runs=2)
    async with serve(scripted, policy) as api:
        first = await api.start("wait")
        second = await api.start("wait")
        response = await api.client.post("/v1/runs", json={"input": "one too many"})
        assert response.status_code == 429
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"] == {
            "message": "Too many concurrent runs (max 2)",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
        await api.stop(first, wait=True)  # a settled run frees its place
        third = await api.start("hello")
        for run_id in (second, third):
            await api.stop(run_id, wait=True)


async def test_unknown_routes_and_methods(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("hello")
        cases = {
            ("GET", "/v1/other"): 404,
            ("GET", f"/v1/runs/{run_id}/nothing"): 404,
            ("GET", f"/v1/runs/{run_id}/stop"): 405,
            ("POST", f"/v1/runs/{run_id}"): 405,
            ("DELETE", "/v1/runs"): 405,
            ("GET", "/v1/runs/run_unknown"): 404,
        }
        for (method, path), status in cases.items():
            response = await api.client.request(method, path)
            assert response.status_code == status, (method, path, response.text)
            assert set(response.json()["error"]) == {"message", "type", "param", "code"}
        async with httpx2.AsyncClient(base_url=api.server.url) as anonymous:
            health = await anonymous.get("/health")
        assert health.status_code == 200  # no key needed
        assert health.json() == {"status": "ok", "platform": "band-trio"}
        doc = (Path(__file__).parents[2] / "docs" / "how-to" / "runs-api.md").read_text()
        row = re.search(r"^\| `GET /health` \| \*\*200\*\* `(\{.*?\})`", doc, re.MULTILINE)
        assert row is not None and json.loads(row.group(1)) == health.json()  # as documented
        bad_id = await api.client.get(f"/v1/runs/{run_id}/events", headers={"last-event-id": "x"})
        assert bad_id.status_code == 400


async def test_200_runs_started_and_stopped_leave_no_task_behind(scripted: Scripted) -> None:
    policy = RunsPolicy(max_concurrent_runs=200)
    before = trio.lowlevel.current_statistics().tasks_living
    async with serve(scripted, policy) as api:
        idle = api.service.live_tasks()  # the sweeper
        run_ids = [await api.start("wait") for _ in range(200)]
        assert len(api.service.active) == 200
        async with trio.open_nursery() as nursery:
            for run_id in run_ids[::2]:  # half stopped and awaited, half stopped blind
                nursery.start_soon(partial(api.stop, run_id, "bulk", wait=True))
            for run_id in run_ids[1::2]:
                nursery.start_soon(api.stop, run_id)
        for run_id in run_ids:
            await api.settled(run_id)
        assert api.service.active == {}
        statuses = {(await api.status(run_id))["status"] for run_id in run_ids}
        assert statuses == {"cancelled"}
        await trio.testing.wait_all_tasks_blocked()  # a settled run's task has returned
        assert api.service.live_tasks() == idle
    assert trio.lowlevel.current_statistics().tasks_living == before


async def test_the_server_leaves_no_task_behind(scripted: Scripted) -> None:
    before = trio.lowlevel.current_statistics().tasks_living
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        async with api.subscribe(run_id) as stream:
            await api.stop(run_id)
            await stream.until_end()
        await api.start("wait")  # still running at the close: stopped by it
    assert trio.lowlevel.current_statistics().tasks_living == before


async def test_a_start_while_closing_is_503(scripted: Scripted) -> None:
    policy = RunsPolicy(shutdown_grace=DEADLINE)
    async with serve(scripted, policy) as api:
        try:
            await api.start("shield")  # holds the close open: it ignores the stop
            with trio.fail_after(DEADLINE):
                await scripted.entered.wait()
            api.server.close()
            response = await api.client.post("/v1/runs", json={"input": "late"})
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "gateway_draining"
        finally:
            scripted.release.set()


async def test_a_silent_stream_gets_keepalives(scripted: Scripted) -> None:
    async with serve(scripted, RunsPolicy(keepalive=0.05)) as api:
        run_id = await api.start("wait")
        async with api.subscribe(run_id) as stream:
            assert await stream.next(comment="keepalive") is None
            assert not stream.ended
            scripted.release.set()
            await stream.until_end()
        assert "keepalive" in stream.comments
        assert stream.names == ["message.delta", "run.completed"]
