"""The bridge's forwards and the runs API's runs are traced like turns: a span each,
with its outcome, and the interrupt or stop that cut it off as a `band.signal` event."""

from __future__ import annotations

import httpx2
import trio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from band_trio import Turn, observe
from band_trio.platform import Platform
from band_trio.runs import open_runs_api
from band_trio.testing import RecordingAdapter, open_recording_target
from bridge._helpers import identity, running_bridge
from support import seeded

KEY = "test-key-0123456789abcdef"
DEADLINE = 10


async def test_an_interrupted_forward_is_a_cancelled_span_with_its_signal(
    platform: Platform, spans: InMemorySpanExporter
) -> None:
    agent_id, room_id, user_id = seeded(platform)
    sampled = observe.REGISTRY.sources
    async with (
        open_recording_target() as target,
        running_bridge([identity(platform, target.url)]) as run,
    ):
        ident = run.bridge.identities[agent_id]
        assert ident.rooms is not None
        room = ident.rooms.current[room_id]
        with trio.fail_after(DEADLINE):
            await run.bridge.wait_until(lambda: ident.rooms_idle)
            target.hold = True
            held = platform.post_message(room_id, user_id, "held")
            await target.wait_until(lambda: held in target.message_ids())
            platform.send_control(agent_id, "interrupt", room_id=room_id, reason="no")
            await run.bridge.wait_until(lambda: room.idle)
            target.hold = False
            after = platform.post_message(room_id, user_id, "after")
            await target.wait_until(lambda: after in target.message_ids())
            await run.bridge.wait_until(lambda: room.idle)
    assert observe.REGISTRY.sources == sampled  # each identity removed its own
    forwards = {
        (span.attributes or {}).get("band.forward.id"): span
        for span in spans.get_finished_spans()
        if span.name == "band_trio.forward"
    }
    cut = forwards[held]
    # the forward is a turn of the runtime's rooms: its span ends after the settle, and
    # says how it ended (the scope's Cancelled is caught inside it, as a turn's is)
    assert (cut.attributes or {})["band.forward.outcome"] == "cancelled"
    (signal,) = [event for event in cut.events if event.name == "band.signal"]
    assert (signal.attributes or {})["band.signal.kind"] == "interrupt"
    assert (signal.attributes or {})["band.signal.reason"] == "no"
    delivered = forwards[after]
    assert (delivered.attributes or {})["band.forward.outcome"] == "delivered"
    assert not delivered.events


async def test_a_stopped_run_is_a_span_with_its_stop_and_its_adapter_call(
    spans: InMemorySpanExporter,
) -> None:
    entered = trio.Event()
    sampled = observe.REGISTRY.sources

    async def held(turn: Turn) -> None:
        entered.set()
        await trio.sleep_forever()

    with trio.fail_after(DEADLINE):
        async with (
            open_runs_api(RecordingAdapter(held), api_key=KEY) as server,
            httpx2.AsyncClient(
                base_url=server.url, headers={"authorization": f"Bearer {KEY}"}
            ) as client,
        ):
            started = await client.post("/v1/runs", json={"input": "think"})
            run_id = started.json()["run_id"]
            await entered.wait()
            stopped = await client.post(f"/v1/runs/{run_id}/stop?wait=true", json={"reason": "x"})
            assert stopped.json()["status"] == "cancelled"
    assert observe.REGISTRY.sources == sampled  # the runs API removed its own
    found = spans.get_finished_spans()
    (run,) = [span for span in found if span.name == "band_trio.run"]
    assert (run.attributes or {})["band.run.id"] == run_id
    assert (run.attributes or {})["band.run.outcome"] == "cancelled"
    (signal,) = [event for event in run.events if event.name == "band.signal"]
    assert (signal.attributes or {})["band.signal.kind"] == "stop"
    assert (signal.attributes or {})["band.signal.reason"] == "x"
    adapters = [span for span in found if span.name == "band_trio.adapter"]
    assert len(adapters) == 1 and adapters[0].parent is not None and run.context is not None
    assert adapters[0].parent.span_id == run.context.span_id
    assert (adapters[0].attributes or {})["band.cancelled"] is True
