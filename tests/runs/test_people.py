"""Approvals and steering in the runs API, driven as a client of today's Hermes would.

The client is written from Hermes' own source (NousResearch/hermes-agent
`gateway/platforms/api_server_runs.py` @ 005b4b7): `approval.request` on the event
stream with `choices` and a `request_id`, the run's status `waiting_for_approval`
meanwhile with the request as `approval`, `POST /v1/runs/{id}/approval`
`{"choice"}` → 200 `{"object": "hermes.run.approval_response", "run_id", "choice",
"resolved"}` and an `approval.responded` event, 400 `invalid_approval_choice`, 409
`approval_not_pending`; `POST /v1/runs/{id}/steer` `{"text"}` → 200 `{"object":
"hermes.run.steer", "run_id", "accepted": true}` and a `run.steered` event, 409
`run_not_accepting_steer`, and guidance never taken returned as `pending_steer`
on the completed event and status. Every test is over a real loopback socket.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from band_trio.adapters import demo
from band_trio.contract import Adapter, Turn
from band_trio.runs import RunsPolicy

from .conftest import DEADLINE, Api, Scripted, serve

Json = dict[str, Any]


async def _approval(api: Api, run_id: str, body: Json) -> tuple[int, Json]:
    response = await api.client.post(f"/v1/runs/{run_id}/approval", json=body)
    return response.status_code, dict(response.json())


async def _steer(api: Api, run_id: str, text: str) -> tuple[int, Json]:
    response = await api.client.post(f"/v1/runs/{run_id}/steer", json={"text": text})
    return response.status_code, dict(response.json())


async def _running(api: Api, run_id: str) -> None:
    """The run has reached its adapter and is blocked in it (no sleep: every task waits)."""
    with trio.fail_after(DEADLINE):
        while api.service.runs[run_id].status.value == "queued":
            await trio.testing.wait_all_tasks_blocked()


# -- approvals ---------------------------------------------------------------------------


async def test_an_ask_is_an_approval_request_answered_with_the_adapters_choice() -> None:
    async with serve(demo()) as api:
        run_id = await api.start("ask deploy?")
        async with api.subscribe(run_id) as stream:
            request = await stream.until("approval.request")
            assert request["command"] == "deploy?"
            assert request["description"] == "deploy?"
            assert request["choices"] == ["approve", "deny"]
            assert request["request_id"] == request["approval_id"]
            status = await api.status(run_id)
            assert status["status"] == "waiting_for_approval"
            assert status["last_event"] == "approval.request"
            assert status["approval"]["request_id"] == request["request_id"]

            code, body = await _approval(api, run_id, {"choice": "approve"})
            assert code == 200, body
            assert body == {
                "object": "hermes.run.approval_response",
                "run_id": run_id,
                "choice": "approve",
                "request_id": request["request_id"],
                "resolved": 1,
            }
            responded = await stream.until("approval.responded")
            assert responded["choice"] == "approve"
            assert responded["request_id"] == request["request_id"]
            assert responded["resolved"] == 1
            completed = await stream.until("run.completed")
            assert completed["output"] == "approve: ask deploy?"
            assert "pending_steer" not in completed
        status = await api.status(run_id)
        assert status["status"] == "completed" and "approval" not in status


async def test_hermes_choices_map_onto_a_yes_no_pair() -> None:
    """`once`, `session`, `always` (and Hermes' aliases) are the first choice, `deny` the last."""
    async with serve(demo()) as api:
        for given, taken in (
            ("once", "approve"),
            ("Session", "approve"),
            ("always", "approve"),
            ("allow", "approve"),
            ("deny", "deny"),
            (" DENY ", "deny"),
        ):
            run_id = await api.start("ask deploy?")
            async with api.subscribe(run_id) as stream:
                await stream.until("approval.request")
                code, body = await _approval(api, run_id, {"choice": given})
                assert code == 200, body
                assert body["choice"] == taken
                completed = await stream.until("run.completed")
                assert completed["output"] == f"{taken}: ask deploy?"


class Asks(Adapter):
    """Asks its input's question with three choices, or twice at once for `twice`, or
    with a short deadline for `hurry`; replies with what it was told."""

    async def on_turn(self, turn: Turn) -> None:
        text = turn.message.content
        if text == "twice":
            answers: list[str] = []

            async def one(question: str) -> None:
                answers.append(await turn.ask(question))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(one, "first?")
                nursery.start_soon(one, "second?")
            await turn.reply(" ".join(answers))
        elif text == "hurry":
            await turn.reply(await turn.ask("now?", answer_within=0.05, default="approve"))
        else:
            await turn.reply(await turn.ask(text, ("red", "green", "blue")))


async def test_a_choice_not_offered_is_400_and_nothing_pending_is_409() -> None:
    async with serve(Asks()) as api:
        run_id = await api.start("colour?")
        code, body = await _approval(api, run_id, {"choice": "once"})
        assert code in (400, 409)  # the ask may not have reached the stream yet
        async with api.subscribe(run_id) as stream:
            request = await stream.until("approval.request")
            assert request["choices"] == ["red", "green", "blue"]
            for wrong in ({"choice": "once"}, {"choice": "purple"}, {"choice": 3}, {}):
                code, body = await _approval(api, run_id, wrong)
                assert code == 400, (wrong, body)
                error = body["error"]
                assert isinstance(error, dict)
                assert error["code"] == "invalid_approval_choice"
                assert (
                    error["message"] == "Invalid approval choice; expected one of: red, green, blue"
                )
            code, body = await _approval(api, run_id, {"choice": "green", "request_id": "other"})
            assert code == 409 and body["error"]["code"] == "approval_not_pending"
            code, body = await _approval(api, run_id, {"choice": "GREEN"})
            assert code == 200 and body["choice"] == "green"
            completed = await stream.until("run.completed")
            assert completed["output"] == "green"
        code, body = await _approval(api, run_id, {"choice": "green"})
        assert code == 409
        assert body["error"] == {  # Hermes' envelope and message
            "message": f"Run has no pending approval: {run_id}",
            "type": "invalid_request_error",
            "param": None,
            "code": "approval_not_pending",
        }


async def test_only_one_approval_is_pending_at_a_time() -> None:
    async with serve(Asks()) as api:
        run_id = await api.start("twice")
        async with api.subscribe(run_id) as stream:
            first = await stream.until("approval.request")
            assert (await _approval(api, run_id, {"choice": "deny"}))[0] == 200
            await stream.until("approval.responded")
            second = await stream.until("approval.request")
            assert second["command"] != first["command"]
            assert second["request_id"] != first["request_id"]
            assert (await _approval(api, run_id, {"choice": "approve"}))[0] == 200
            completed = await stream.until("run.completed")
        assert stream.names.count("approval.request") == 2
        assert sorted(completed["output"].split()) == ["approve", "deny"]


async def test_an_unanswered_approval_takes_its_default_and_says_so() -> None:
    async with serve(Asks()) as api:
        run_id = await api.start("hurry")
        stream = await api.events(run_id)
        assert stream.names == [
            "approval.request",
            "approval.responded",
            "message.delta",
            "run.completed",
        ]
        responded = stream.events[1]
        assert responded["choice"] == "approve"
        assert responded["timed_out"] is True and responded["resolved"] == 0
        assert stream.events[-1]["output"] == "approve"


async def test_a_stop_during_the_approval_wait_ends_the_run_at_once() -> None:
    async with serve(demo()) as api:
        run_id = await api.start("ask deploy?")
        async with api.subscribe(run_id) as stream:
            await stream.until("approval.request")
            began = trio.current_time()
            response = await api.stop(run_id, "no deploys today")
            assert response.status_code == 200
            cancelled = await stream.until("run.cancelled")
            assert trio.current_time() - began < 1.0
        assert cancelled["cancel_reason"] == "no deploys today"
        status = await api.status(run_id)
        assert status["status"] == "cancelled" and "approval" not in status
        code, _ = await _approval(api, run_id, {"choice": "approve"})
        assert code == 409


# -- steering ----------------------------------------------------------------------------


async def test_steer_a_running_run_and_see_the_guidance_in_its_output() -> None:
    async with serve(demo()) as api:
        run_id = await api.start("sleep=1 then answer")
        await _running(api, run_id)
        code, body = await _steer(api, run_id, "be brief")
        assert code == 200, body
        assert body == {"object": "hermes.run.steer", "run_id": run_id, "accepted": True}
        response = await api.client.post(f"/v1/runs/{run_id}/steer", json={"input": "and kind"})
        assert response.status_code == 200  # Hermes reads `input`, `message` or `text`
        stream = await api.events(run_id)
        assert stream.names.count("run.steered") == 2
        assert stream.events[-1]["output"] == (
            "echo: sleep=1 then answer (guidance: be brief; and kind)"
        )
        assert "pending_steer" not in stream.events[-1]


async def test_steer_while_the_run_waits_for_an_approval() -> None:
    async with serve(demo()) as api:
        run_id = await api.start("ask deploy?")
        async with api.subscribe(run_id) as stream:
            await stream.until("approval.request")
            assert (await _steer(api, run_id, "only staging"))[0] == 200
            assert (await api.status(run_id))["status"] == "waiting_for_approval"
            assert (await _approval(api, run_id, {"choice": "once"}))[0] == 200
            completed = await stream.until("run.completed")
        assert completed["output"] == "approve: ask deploy? (guidance: only staging)"


async def test_steer_a_finished_run_is_409_and_empty_text_400() -> None:
    async with serve(demo()) as api:
        run_id = await api.start("hello")
        await api.settled(run_id)
        code, body = await _steer(api, run_id, "too late")
        assert code == 409
        assert body["error"] == {
            "message": f"Run is not currently accepting steer input: {run_id}",
            "type": "invalid_request_error",
            "param": None,
            "code": "run_not_accepting_steer",
        }
        live = await api.start("ask deploy?")
        await _running(api, live)
        code, body = await _steer(api, live, "   ")
        assert code == 400 and body["error"]["code"] == "invalid_steer_input"
        response = await api.client.post("/v1/runs/run_nope/steer", json={"text": "x"})
        assert response.status_code == 404
        await api.stop(live)


async def test_guidance_never_taken_is_returned_on_completion(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        await _running(api, run_id)
        assert (await _steer(api, run_id, "first"))[0] == 200
        assert (await _steer(api, run_id, "second"))[0] == 200
        scripted.release.set()
        stream = await api.events(run_id)
        completed = stream.events[-1]
        assert completed["event"] == "run.completed"
        assert completed["pending_steer"] == "first\nsecond"
        assert (await api.status(run_id))["pending_steer"] == "first\nsecond"


async def test_queued_guidance_is_bounded(scripted: Scripted) -> None:
    policy = RunsPolicy(max_guidance_per_run=2, max_guidance_chars=10)
    async with serve(scripted, policy) as api:
        run_id = await api.start("wait")
        await _running(api, run_id)
        code, body = await _steer(api, run_id, "x" * 11)
        assert code == 413 and body["error"]["code"] == "steer_too_large"
        assert (await _steer(api, run_id, "one"))[0] == 200
        assert (await _steer(api, run_id, "two"))[0] == 200
        response = await api.client.post(f"/v1/runs/{run_id}/steer", json={"text": "three"})
        assert response.status_code == 429
        assert response.json()["error"]["code"] == "steer_queue_full"
        assert response.headers["retry-after"] == "1"
        scripted.release.set()
        stream = await api.events(run_id)
        assert stream.events[-1]["pending_steer"] == "one\ntwo"
