"""Events kept per run: re-attach with `Last-Event-ID`, several subscribers, a finished
run readable until its window ends, a client disconnect that does not cancel (unless
asked), and the adapter's tool events as Hermes names them."""

from __future__ import annotations

import trio

from band_trio.runs import RunsPolicy

from .conftest import DEADLINE, Scripted, serve


async def test_reattach_with_last_event_id_gets_what_was_missed(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("tools")
        await api.settled(run_id)
        whole = await api.events(run_id)
        assert whole.ids == [1, 2, 3, 4, 5]
        assert whole.names == [
            "reasoning.available",
            "tool.started",
            "tool.completed",
            "message.delta",
            "run.completed",
        ]
        for seen in range(len(whole.ids) + 1):
            rest = await api.events(run_id, last_event_id=seen)
            assert rest.events == whole.events[seen:]
            assert rest.ids == whole.ids[seen:]


async def test_a_client_that_disconnects_and_reattaches_misses_nothing(
    scripted: Scripted,
) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        async with api.subscribe(run_id) as stream:
            with trio.fail_after(DEADLINE):
                await scripted.entered.wait()
            await stream.response.aclose()  # the client goes away mid-run
        run = api.service.runs[run_id]
        with trio.fail_after(DEADLINE):
            while run.subscribers:  # the server saw it leave
                await run.wait_subscribers_changed()
        assert (await api.status(run_id))["status"] == "running"  # not cancelled
        scripted.release.set()
        await api.settled(run_id)
        again = await api.events(run_id, last_event_id=0)
        assert again.names == ["message.delta", "run.completed"]


async def test_two_subscribers_see_every_event(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait")
        async with api.subscribe(run_id) as one, api.subscribe(run_id) as two:
            with trio.fail_after(DEADLINE):
                await scripted.entered.wait()
            scripted.release.set()
            await one.until_end()
            await two.until_end()
        assert one.events == two.events
        assert one.names == ["message.delta", "run.completed"]


async def test_a_finished_run_is_readable_until_its_window_ends(scripted: Scripted) -> None:
    policy = RunsPolicy(retention=0.5)
    async with serve(scripted, policy) as api:
        run_id = await api.start("hello")
        await api.settled(run_id)
        assert (await api.status(run_id))["status"] == "completed"
        assert (await api.events(run_id)).names == ["message.delta", "run.completed"]
        with trio.fail_after(DEADLINE):
            await api.service.runs[run_id].forgotten.wait()
        for path in ("", "/events"):
            response = await api.client.get(f"/v1/runs/{run_id}{path}")
            assert response.status_code == 404
        assert (await api.stop(run_id)).status_code == 404
        assert api.service.sessions == {}


async def test_disconnect_cancels_only_when_asked(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("wait", on_disconnect="cancel")
        async with api.subscribe(run_id) as stream:
            with trio.fail_after(DEADLINE):
                await scripted.entered.wait()
            await stream.response.aclose()
        await api.settled(run_id)
        status = await api.status(run_id)
        assert status["status"] == "cancelled"
        assert status["cancel_reason"] == "the client disconnected"


async def test_on_disconnect_is_checked(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        response = await api.client.post("/v1/runs", json={"input": "x", "on_disconnect": "no"})
        assert response.status_code == 400


async def test_a_failed_run_says_why(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("fail")
        stream = await api.events(run_id)
        assert stream.names == ["run.failed"]
        assert stream.events[0]["error"] == "RuntimeError: the adapter failed"
        status = await api.status(run_id)
        assert status["status"] == "failed" and status["error"].startswith("RuntimeError")


async def test_replies_are_deltas_that_add_up_to_the_output(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("twice")
        stream = await api.events(run_id)
        deltas = "".join(e["delta"] for e in stream.events if e["event"] == "message.delta")
        assert deltas == stream.events[-1]["output"] == "one\n\necho: twice"


async def test_the_adapter_sees_the_given_history(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start(
            [{"role": "user", "content": "earlier"}, {"role": "user", "content": "now"}],
            instructions="be brief",
            conversation_history=[{"role": "assistant", "content": "long ago"}],
            model="my-model",
        )
        await api.settled(run_id)
        turn = scripted.turns[-1]
        assert turn.message.content == "now" and turn.room_id == run_id
        assert scripted.histories[-1] == [
            ("System", "be brief"),
            ("Agent", "long ago"),
            ("User", "earlier"),
            ("User", "now"),
        ]
        assert [p.type for p in await turn.participants()] == ["User", "Agent"]
        assert (await api.status(run_id))["model"] == "my-model"
