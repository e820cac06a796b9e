"""Hermes Agent 0.19's 15 runs-API tests (its tests/gateway/test_api_server_runs.py),
over a real socket against the real server.

Where band-trio answers differently on purpose, the test says so and pins
band-trio's answer: a stop of a finished run is 200 with its final state (Hermes
0.19: 404, its references dropped), and an unknown run is 404 at once (Hermes
polls for a second first).
"""

from __future__ import annotations

import httpx2
import trio

from band_trio.contract import Adapter, Turn

from .conftest import DEADLINE, KEY, Scripted, serve

INVALID_KEY = {
    "error": {
        "message": "Invalid API key",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


# -- start --------------------------------------------------------------------------------


async def test_start_returns_202(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        response = await api.client.post("/v1/runs", json={"input": "hello"})
        assert response.status_code == 202
        body = response.json()
        assert body["status"] == "started"
        assert body["run_id"].startswith("run_") and len(body["run_id"]) == 36
        status = await api.status(body["run_id"])
        assert status["object"] == "hermes.run"
        assert status["run_id"] == body["run_id"]
        assert status["session_id"] == body["run_id"]  # Hermes: it defaults to the run id


async def test_start_invalid_json_returns_400(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        response = await api.client.post("/v1/runs", content=b"{not json")
        assert response.status_code == 400
        assert response.json()["error"]["message"] == "Invalid JSON"


async def test_start_missing_input_returns_400(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        response = await api.client.post("/v1/runs", json={"session_id": "s"})
        assert response.status_code == 400
        assert "input" in response.json()["error"]["message"]


async def test_start_empty_input_returns_400(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        for empty in ("", "   ", []):
            response = await api.client.post("/v1/runs", json={"input": empty})
            assert response.status_code == 400, empty
        response = await api.client.post(
            "/v1/runs", json={"input": [{"role": "assistant", "content": "hi"}]}
        )
        assert response.status_code == 400
        assert response.json()["error"]["message"] == "No user message found in input"
        assert api.service.runs == {}


async def test_start_requires_auth(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        for headers in ({}, {"authorization": "Bearer wrong-key-0123456789"}, {"x": "y"}):
            async with httpx2.AsyncClient(base_url=api.server.url, headers=headers) as anonymous:
                response = await anonymous.post("/v1/runs", json={"input": "hello"})
            assert response.status_code == 401
            assert response.json() == INVALID_KEY
        assert api.service.runs == {}


async def test_start_with_valid_auth(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        headers = {"authorization": f"Bearer {KEY}"}
        async with httpx2.AsyncClient(base_url=api.server.url, headers=headers) as client:
            response = await client.post("/v1/runs", json={"input": "hello"})
        assert response.status_code == 202


# -- events -------------------------------------------------------------------------------


async def test_events_stream_returns_completed(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("hello world")
        stream = await api.events(run_id)
        assert stream.names == ["message.delta", "run.completed"]
        assert stream.events[-1]["output"] == "echo: hello world"
        assert all(e["run_id"] == run_id and e["timestamp"] > 0 for e in stream.events)
        assert stream.comments[-1] == "stream closed"


async def test_events_not_found_returns_404(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        response = await api.client.get("/v1/runs/run_nonexistent/events")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "run_not_found"
        assert response.json()["error"]["message"] == "Run not found: run_nonexistent"


async def test_events_requires_auth(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start()
        async with httpx2.AsyncClient(base_url=api.server.url) as anonymous:
            response = await anonymous.get(f"/v1/runs/{run_id}/events")
        assert response.status_code == 401
        assert response.json() == INVALID_KEY


# -- stop ---------------------------------------------------------------------------------


async def test_stop_running_agent(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        with trio.fail_after(DEADLINE):
            await scripted.entered.wait()
        response = await api.stop(run_id)
        assert response.status_code == 200
        assert response.json()["run_id"] == run_id
        assert response.json()["status"] == "stopping"
        assert (await api.status(run_id))["status"] in ("stopping", "cancelled")
        await api.settled(run_id)
        status = await api.status(run_id)
        assert status["status"] == "cancelled"
        assert status["cancel_reason"] is None
        # the references are dropped: no live run, no scope, no remote work held
        run = api.service.runs[run_id]
        assert run_id not in api.service.active
        assert not run.is_live


async def test_stop_nonexistent_run_returns_404(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        response = await api.stop("run_nonexistent")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "run_not_found"


async def test_stop_requires_auth(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        async with httpx2.AsyncClient(base_url=api.server.url) as anonymous:
            response = await anonymous.post(f"/v1/runs/{run_id}/stop")
        assert response.status_code == 401
        assert (await api.status(run_id))["status"] == "running"
        await api.stop(run_id)


async def test_stop_already_completed_run_answers_final_state(scripted: Scripted) -> None:
    """Hermes 0.19 answers 404 here (its references are gone); band-trio keeps the
    record for the retention window and answers with it."""
    async with serve(scripted) as api:
        run_id = await api.start("hello")
        await api.settled(run_id)
        response = await api.stop(run_id, "too late", wait=True)
        assert response.status_code == 200
        body = response.json()
        assert body["status"] == "completed" and body["settled"] is True
        assert "cancel_reason" not in body or body["cancel_reason"] is None
        assert (await api.status(run_id))["output"] == "echo: hello"


class RaisesWhenStopped(Adapter):
    """Hermes' `interrupt()` raising, in trio terms: the adapter's cleanup raises."""

    def __init__(self) -> None:
        self.entered = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        try:
            self.entered.set()
            await trio.sleep_forever()
        finally:
            raise RuntimeError("cleanup failed")


async def test_stop_interrupt_exception_does_not_crash() -> None:
    adapter = RaisesWhenStopped()
    async with serve(adapter) as api:
        run_id = await api.start()
        with trio.fail_after(DEADLINE):
            await adapter.entered.wait()
        response = await api.stop(run_id, wait=True)
        assert response.status_code == 200
        assert response.json()["status"] == "cancelled"  # the stop is what it was
        second = await api.start()  # and the server serves on
        await api.stop(second)


async def test_stop_sends_sentinel_to_events_stream(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        async with api.subscribe(run_id) as stream:
            with trio.fail_after(DEADLINE):
                await scripted.entered.wait()
            await api.stop(run_id, "user pressed stop")
            cancelled = await stream.until("run.cancelled")
            await stream.until_end()
        assert cancelled["cancel_reason"] == "user pressed stop"
        assert stream.ended and stream.comments[-1] == "stream closed"


async def test_references_are_dropped_on_every_path(scripted: Scripted) -> None:
    """Completed, failed, stopped while running, stopped while queued: once settled no
    run holds its scope, its turn control or its remote works, and none is live."""
    async with serve(scripted) as api:
        completed = await api.start("hello")
        failed = await api.start("fail")
        running = await api.start("wait", session_id="s")
        queued = await api.start("hello", session_id="s")
        await api.settled(completed)
        await api.settled(failed)
        for run_id in (queued, running):
            await api.stop(run_id, wait=True)
        statuses = [(await api.status(r))["status"] for r in (completed, failed, running, queued)]
        assert statuses == ["completed", "failed", "cancelled", "cancelled"]
        assert api.service.active == {}
        for run_id in (completed, failed, running, queued):
            run = api.service.runs[run_id]
            assert not run.is_live and run.request.history == ()
