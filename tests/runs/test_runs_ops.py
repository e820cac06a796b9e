"""Capabilities, idempotent starts, listing and shutdown, as a client of today's Hermes
drives them: over a real loopback socket, the client written from Hermes' own source
(`gateway/platforms/api_server_runs.py` @ 4a0f27a: `Idempotency-Key` 1-255 visible
ASCII, replay 202 `{"run_id", "status", "replayed": true}` with `Idempotency-Replayed:
true`, conflict 409 `idempotency_key_conflict`; `interrupted` after a shutdown, #114774;
the capabilities object of `api_server.py`'s `_handle_capabilities`)."""

from __future__ import annotations

from typing import Any

import trio

from band_trio.runs import RunsPolicy

from .conftest import DEADLINE, Api, GatedRemote, Scripted, serve


async def _start(api: Api, key: str, body: dict[str, Any]) -> Any:
    return await api.client.post("/v1/runs", json=body, headers={"idempotency-key": key})


async def test_capabilities_say_what_this_server_supports(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        response = await api.client.get("/v1/capabilities")
        assert response.status_code == 200, response.text
        caps = response.json()
        assert caps["object"] == "hermes.api_server.capabilities"
        assert caps["auth"] == {"type": "bearer", "required": True}
        features = caps["features"]
        for name in (
            "run_submission",
            "run_status",
            "run_events_sse",
            "run_stop",
            "run_steer",
            "run_approval_response",
            "approval_events",
            "tool_progress_events",
            "run_listing",
            "run_events_resume",
            "run_remote_stop",
        ):
            assert features[name] is True, name
        assert features["chat_completions"] is False  # not served here: said so
        endpoints = caps["endpoints"]
        assert endpoints["runs"] == {"method": "POST", "path": "/v1/runs"}
        assert endpoints["run_list"] == {"method": "GET", "path": "/v1/runs"}
        assert endpoints["run_steer"] == {"method": "POST", "path": "/v1/runs/{run_id}/steer"}
        assert endpoints["run_approval"]["path"] == "/v1/runs/{run_id}/approval"
        assert endpoints["capabilities"] == {"method": "GET", "path": "/v1/capabilities"}
        assert {"run.completed", "run.cancelled", "run.interrupted", "approval.request"} <= set(
            caps["events"]
        )
        assert caps["idempotency"]["supported"] is True
        assert caps["idempotency"]["durable"] is False
        assert caps["events_stream"]["resume_header"] == "Last-Event-ID"
        # the key is needed, as for every route but /health
        anonymous = await api.client.get("/v1/capabilities", headers={"authorization": ""})
        assert anonymous.status_code == 401
        assert (await api.client.post("/v1/capabilities")).status_code == 405


async def test_a_retried_start_is_the_same_run_and_another_body_is_409(
    scripted: Scripted,
) -> None:
    async with serve(scripted) as api:
        first = await _start(api, "order-17", {"input": "hi"})
        assert first.status_code == 202, first.text
        assert first.json() == {
            "run_id": first.json()["run_id"],
            "status": "started",
            "replayed": False,
        }
        run_id = first.json()["run_id"]
        await api.settled(run_id)

        again = await _start(api, "order-17", {"input": "hi"})
        assert again.status_code == 202, again.text
        assert again.headers["idempotency-replayed"] == "true"
        assert again.json() == {"run_id": run_id, "status": "completed", "replayed": True}
        assert list(api.service.runs) == [run_id]  # one run, not two

        other = await _start(api, "order-17", {"input": "something else"})
        assert other.status_code == 409, other.text
        error = other.json()["error"]
        assert error["code"] == "idempotency_key_conflict"
        assert error["type"] == "invalid_request_error"
        assert list(api.service.runs) == [run_id]

        # the same body spelled otherwise is the same request (Hermes hashes the JSON)
        spelled = await api.client.post(
            "/v1/runs",
            content=b'{  "input" : "hi" }',
            headers={"idempotency-key": "order-17"},
        )
        assert spelled.json()["run_id"] == run_id

        # no key, or another key: a new run
        assert (await _start(api, "order-18", {"input": "hi"})).json()["run_id"] != run_id
        assert (await api.client.post("/v1/runs", json={"input": "hi"})).status_code == 202


async def test_a_replay_is_answered_while_the_run_is_live_and_at_the_limit(
    scripted: Scripted,
) -> None:
    async with serve(scripted, RunsPolicy(max_concurrent_runs=1)) as api:
        first = await _start(api, "k-1", {"input": "wait"})
        run_id = first.json()["run_id"]
        again = await _start(api, "k-1", {"input": "wait"})  # the limit is reached: no 429
        assert again.status_code == 202, again.text
        assert again.json()["run_id"] == run_id
        assert again.json()["status"] in ("queued", "running")
        scripted.release.set()
        await api.settled(run_id)


async def test_bad_idempotency_keys_are_400() -> None:
    async with serve(Scripted()) as api:
        for key in ("x" * 256, "has space", "tab\tkey", "é"):
            response = await api.client.post(
                "/v1/runs",
                json={"input": "hi"},
                headers=[("idempotency-key", key.encode("utf-8"))],  # type: ignore[list-item]
            )
            assert response.status_code == 400, (key, response.text)
            assert response.json()["error"]["code"] == "invalid_idempotency_key"
        two = await api.client.post(
            "/v1/runs",
            json={"input": "hi"},
            headers=[("idempotency-key", "a"), ("idempotency-key", "b")],
        )
        assert two.status_code == 400
        assert not api.service.runs


async def test_keys_are_remembered_for_a_bounded_count(scripted: Scripted) -> None:
    async with serve(scripted, RunsPolicy(max_idempotency_keys=2)) as api:
        ids = [(await _start(api, f"k{i}", {"input": "hi"})).json()["run_id"] for i in range(3)]
        assert len(api.service.runs) == 3
        # k0 was forgotten (the oldest of three, past two): its key starts a new run
        again = await _start(api, "k0", {"input": "hi"})
        assert again.json()["replayed"] is False and again.json()["run_id"] not in ids
        assert (await _start(api, "k2", {"input": "hi"})).json()["run_id"] == ids[2]


async def test_a_key_goes_with_its_run_when_the_run_is_forgotten(scripted: Scripted) -> None:
    async with serve(scripted, RunsPolicy(retention=0)) as api:
        first = (await _start(api, "k", {"input": "hi"})).json()["run_id"]
        run = api.service.runs.get(first)  # (None: forgotten already, retention 0)
        if run is not None:
            with trio.fail_after(DEADLINE):
                await run.forgotten.wait()
        second = await _start(api, "k", {"input": "hi"})
        assert second.json()["replayed"] is False and second.json()["run_id"] != first


async def test_listing_is_paged_newest_first_and_filtered_by_status(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        done = []
        for i in range(5):
            run_id = await api.start(f"n{i}")
            await api.settled(run_id)
            done.append(run_id)
        live = await api.start("wait")

        everything = (await api.client.get("/v1/runs")).json()
        assert everything["object"] == "list"
        assert [run["run_id"] for run in everything["data"]] == [live, *reversed(done)]
        assert everything["has_more"] is False
        assert everything["data"][0]["object"] == "hermes.run"

        seen: list[str] = []
        after = None
        while True:
            query = "?status=completed&limit=2" + (f"&after={after}" if after else "")
            page = (await api.client.get(f"/v1/runs{query}")).json()
            assert len(page["data"]) <= 2
            assert all(run["status"] == "completed" for run in page["data"])
            assert "output" not in page["data"][0]  # a page stays small: GET the run for it
            seen += [run["run_id"] for run in page["data"]]
            if not page["has_more"]:
                break
            after = page["last_id"]
        assert seen == list(reversed(done))

        running = (await api.client.get("/v1/runs?status=running")).json()["data"]
        assert [run["run_id"] for run in running] == [live]

        for bad in ("?limit=0", "?limit=101", "?limit=x", "?status=nope", "?after=run_nope"):
            response = await api.client.get(f"/v1/runs{bad}")
            assert response.status_code == 400, (bad, response.text)
        scripted.release.set()


async def test_a_shutdown_marks_a_running_run_interrupted_and_stops_its_remote_work() -> None:
    adapter = GatedRemote()
    adapter.start_gate.set()
    adapter.stop_gate.set()
    async with serve(adapter) as api:
        run_id = await api.start("go")
        async with api.subscribe(run_id) as stream:
            with trio.fail_after(DEADLINE):
                await adapter.starting.wait()
            api.server.close()
            interrupted = await stream.until("run.interrupted")
            await stream.until_end()
        assert "run.cancelled" not in stream.names
        assert interrupted["error"] == "the runs API shut down before the run ended"
        assert interrupted["remote_stop"] == "confirmed"
        assert adapter.stopped == ["h1"]
        run = api.service.runs[run_id]
        assert run.status.value == "interrupted"
        body = run.status_body()
        assert body["status"] == "interrupted" and body["last_event"] == "run.interrupted"
        assert body["error"] == "the runs API shut down before the run ended"


async def test_a_run_stopped_before_the_shutdown_stays_cancelled(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("shield")
        await api.stop(run_id, "mine")
        api.server.close()
        scripted.release.set()
        await api.settled(run_id)
        assert api.service.runs[run_id].status.value == "cancelled"
