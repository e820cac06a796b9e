"""The stop rules beyond Hermes: a bounded wait an uncooperative adapter cannot stretch,
`?wait=true` that cannot answer before the run settled, a stop before the remote work
started, idempotence, and the reason reaching the session's next run."""

from __future__ import annotations

import trio

from band_trio.contract import Adapter, StopOutcome, Turn
from band_trio.runs import RunsPolicy

from .conftest import DEADLINE, KEY, GatedRemote, Scripted, serve


async def test_stop_of_an_adapter_that_ignores_the_cancel_answers_within_the_wait(
    scripted: Scripted,
) -> None:
    policy = RunsPolicy(stop_wait=0.3)
    async with serve(scripted, policy) as api:
        try:
            run_id = await api.start("shield")
            with trio.fail_after(DEADLINE):
                await scripted.entered.wait()
            began = trio.current_time()
            # bounded, whatever the adapter does: its shielded wait is never released, so
            # any deadline shows it (stop_wait + 2 s was one a loaded CI machine could miss)
            with trio.fail_after(policy.stop_wait + DEADLINE):
                response = await api.stop(run_id, "now", wait=True)
            assert trio.current_time() - began >= policy.stop_wait
            body = response.json()
            assert response.status_code == 200
            assert body["status"] == "stopping" and body["settled"] is False
            assert body["overrun"] is True
            assert "did not end within 0.3s" in body["detail"]
            status = await api.status(run_id)
            assert status["status"] == "stopping" and status["overrun"] is True
            assert run_id in api.service.active  # still counted: it still runs
        finally:
            scripted.release.set()  # the adapter ends at last (and a failed test ends)
        await api.settled(run_id)
        status = await api.status(run_id)
        assert status["status"] == "cancelled" and status["overrun"] is True


async def test_wait_true_answers_only_once_the_run_settled() -> None:
    """LangGraph's `wait=true` answered in 15 ms with the run still running
    (langgraphjs#2755). Here the remote stop is held open by the test: the answer
    cannot come before it has settled, and it carries the stop's outcome."""
    adapter = GatedRemote()
    adapter.start_gate.set()
    async with serve(adapter) as api:
        run_id = await api.start()
        with trio.fail_after(DEADLINE):
            await adapter.starting.wait()
        answered = trio.Event()
        answers: list[dict[str, object]] = []

        async def stop_and_wait() -> None:
            response = await api.stop(run_id, "enough", wait=True)
            answers.append(response.json())
            answered.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_and_wait)
            with trio.fail_after(DEADLINE):
                await adapter.stopping.wait()  # the server is sending the remote stop
            status = await api.status(run_id)  # a round trip after it: the server ran on
            assert status["status"] == "stopping"
            assert not answered.is_set(), answers
            adapter.stop_gate.set()
        (body,) = answers
        assert body["status"] == "cancelled" and body["settled"] is True
        assert body["remote_stop"] == "confirmed"
        assert [s["handle"] for s in body["remote_stops"]] == ["h1"]
        assert body["cancel_reason"] == "enough" and body["overrun"] is False


async def test_a_stop_while_the_remote_start_is_in_flight_stops_it_once_known() -> None:
    """ag-ui#2759 lost a stop that came before the run had started its remote work.
    Here the start call is in flight when the stop lands; the work it starts is
    stopped as soon as its handle is revealed, and the stop's answer says so."""
    adapter = GatedRemote()
    adapter.stop_gate.set()
    async with serve(adapter) as api:
        run_id = await api.start()
        with trio.fail_after(DEADLINE):
            await adapter.starting.wait()
        first = await api.stop(run_id, "early")
        assert first.json()["status"] == "stopping"
        assert adapter.stopped == []  # nothing to stop yet: no handle
        adapter.start_gate.set()
        response = await api.stop(run_id, wait=True)
        body = response.json()
        assert adapter.stopped == ["h1"]
        assert body["status"] == "cancelled" and body["remote_stop"] == "confirmed"
        assert body["cancel_reason"] == "early"  # the first stop's reason is kept


async def test_a_stop_before_the_run_began_is_applied(scripted: Scripted) -> None:
    """A run queued behind its session's running run: stopped there, it never reaches
    the adapter, and the session's running run is untouched."""
    async with serve(scripted) as api:
        first = await api.start("wait", session_id="s1")
        queued = await api.start("hello", session_id="s1")
        with trio.fail_after(DEADLINE):
            await scripted.entered.wait()
        assert (await api.status(queued))["status"] == "queued"
        response = await api.stop(queued, "not this one", wait=True)
        assert response.json()["status"] == "cancelled"
        assert [turn.message.id for turn in scripted.turns] == [first]
        assert (await api.status(first))["status"] == "running"
        scripted.release.set()
        await api.settled(first)
        assert (await api.status(first))["status"] == "completed"
        following = await api.start("hello", session_id="s1")
        await api.settled(following)
        assert scripted.turns[-1].last_abort is None  # nothing it saw was cut off


async def test_stop_is_idempotent(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        with trio.fail_after(DEADLINE):
            await scripted.entered.wait()
        first = (await api.stop(run_id, "first")).json()
        second = (await api.stop(run_id, "second")).json()
        assert first["status"] == "stopping"
        assert second["status"] in ("stopping", "cancelled")  # the first one may have landed
        assert second["cancel_reason"] == "first"
        settled = (await api.stop(run_id, "third", wait=True)).json()
        again = (await api.stop(run_id, "fourth", wait=True)).json()
        assert settled == again
        assert settled["status"] == "cancelled" and settled["cancel_reason"] == "first"
        stream = await api.events(run_id)
        assert stream.names.count("run.cancelled") == 1


async def test_the_stop_reason_reaches_the_sessions_next_run(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        stopped = await api.start("wait", session_id="chat")
        with trio.fail_after(DEADLINE):
            await scripted.entered.wait()
        await api.stop(stopped, "wrong question", wait=True)
        following = await api.start("hello again", session_id="chat")
        await api.settled(following)
        turn = scripted.turns[-1]
        assert turn.room_id == "chat"
        assert turn.last_abort is not None
        assert (turn.last_abort.kind, turn.last_abort.reason) == ("stop", "wrong question")
        assert turn.last_abort.message_id == stopped
        assert scripted.histories[-1] == [("User", "wait"), ("User", "hello again")]


async def test_stop_reason_and_wait_are_checked(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        bad_reason = await api.client.post(f"/v1/runs/{run_id}/stop", json={"reason": 5})
        bad_wait = await api.client.post(f"/v1/runs/{run_id}/stop?wait=soon")
        bad_json = await api.client.post(f"/v1/runs/{run_id}/stop", content=b"{")
        assert [r.status_code for r in (bad_reason, bad_wait, bad_json)] == [400, 400, 400]
        assert (await api.status(run_id))["status"] in ("queued", "running")
        await api.stop(run_id)


class FailingStop(Adapter):
    """Remote work whose stop call fails (the peer refuses, or is gone)."""

    def __init__(self) -> None:
        self.started = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        async def stop(handle: str) -> StopOutcome:
            raise ConnectionError("peer gone")

        async with turn.remote(stop=stop, name="refusing work") as work:
            work.started("task-9")
            self.started.set()
            await trio.sleep_forever()


async def test_a_failed_remote_stop_is_reported_unconfirmed() -> None:
    adapter = FailingStop()
    async with serve(adapter) as api:
        run_id = await api.start()
        with trio.fail_after(DEADLINE):
            await adapter.started.wait()
        body = (await api.stop(run_id, wait=True)).json()
        assert body["status"] == "cancelled" and body["remote_stop"] == "unconfirmed"
        (stop,) = body["remote_stops"]
        assert stop["handle"] == "task-9" and "ConnectionError: peer gone" in stop["detail"]


async def test_the_bearer_scheme_is_case_insensitive(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        headers = {"authorization": f"bearer {KEY}"}
        response = await api.client.post("/v1/runs", json={"input": "x"}, headers=headers)
        assert response.status_code == 202
        bare = await api.client.post(
            "/v1/runs", json={"input": "x"}, headers={"authorization": KEY}
        )
        assert bare.status_code == 401
