"""The spans of a turn, a stop and an interrupt, read from an in-memory exporter.

The agent and the platform run over real loopback sockets, the signals travel
as `agent.control` pushes; the spans go to OpenTelemetry's SDK with an
in-memory exporter (`observe.use_tracer_provider`), so each test reads the
tree a collector would get: the turn span, its claim, its adapter call, each
remote stop and each REST call, and the signal as an event with its latency.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from band_trio import Policy, StopOutcome, Turn, observe
from band_trio.observe import hooks as hooks
from band_trio.platform import Platform
from support import Recorder, running_agent, seeded, status

DEADLINE = 10
FAST = Policy(backend_stop_grace=0.5, cleanup_grace=0.3, shutdown_grace=0.2)


class Peer:
    """Remote work that runs until stopped, and confirms the stop."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.stopped: list[str] = []

    async def stop(self, handle: str) -> StopOutcome:
        self.stopped.append(handle)
        return StopOutcome.CONFIRMED


def remote_work(peer: Peer) -> Recorder:
    async def behaviour(turn: Turn) -> None:
        if turn.message.content == "quick" or turn.last_abort is not None:
            await turn.reply("done")  # a replay after a stop finishes
            return
        async with turn.remote(stop=peer.stop, name="job") as work:
            work.started(f"task-{turn.message.id}")
            peer.started.set()
            await trio.sleep_forever()

    return Recorder(behaviour)


def one(found: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    matching = [span for span in found if span.name == name]
    assert len(matching) == 1, f"{name}: {[s.name for s in found]}"
    return matching[0]


def children(found: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [
        span
        for span in found
        if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]


def turn_spans(found: Sequence[ReadableSpan], message_id: str) -> list[ReadableSpan]:
    return [
        span
        for span in found
        if span.name == "band_trio.turn"
        and (span.attributes or {}).get("band.turn.id") == message_id
    ]


def tree(found: Sequence[ReadableSpan], root: ReadableSpan) -> list[ReadableSpan]:
    """`root` and everything under it."""
    out = [root]
    for child in children(found, root):
        out.extend(tree(found, child))
    return out


async def test_an_interrupted_turn_has_its_signal_its_cancelled_adapter_and_its_remote_stop(
    platform: Platform, spans: InMemorySpanExporter
) -> None:
    agent_id, room, user = seeded(platform)
    peer = Peer()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, remote_work(peer), policy=FAST):
            message = platform.post_message(room, user, "work")
            await peer.started.wait()
            correlation = platform.send_control(
                agent_id, "interrupt", room_id=room, reason="enough"
            )
            await platform.wait_until(lambda: status(platform, message) == "processed")
    found = spans.get_finished_spans()
    (turn,) = turn_spans(found, message)
    attributes = dict(turn.attributes or {})
    assert attributes["band.room.id"] == room
    assert attributes["band.agent.id"] == agent_id
    assert attributes["band.sender.type"] == "User"
    assert attributes["band.turn.outcome"] == "aborted"
    assert turn.status.status_code is StatusCode.UNSET  # an interrupt is not an error
    (signal,) = [event for event in turn.events if event.name == "band.signal"]
    assert signal.attributes is not None
    assert signal.attributes["band.signal.kind"] == "interrupt"
    assert signal.attributes["band.signal.reason"] == "enough"
    assert signal.attributes["band.signal.correlation_id"] == correlation
    latency = signal.attributes["band.signal.latency_seconds"]
    assert isinstance(latency, float) and 0 < latency < FAST.backend_stop_grace
    assert turn.start_time is not None and turn.end_time is not None
    assert turn.start_time < signal.timestamp < turn.end_time

    consumed = one(children(found, turn), "POST chats/{room}/messages/{message}/processed")
    assert consumed.start_time is not None
    # the latency ends where the turn's scope exits, before its settling begins
    assert signal.timestamp + latency * 1e9 < consumed.start_time

    names = sorted(span.name for span in children(found, turn))
    assert names == [
        "POST chats/{room}/activity",  # working: true (the keep-alive, beside the adapter)
        "POST chats/{room}/activity",  # working: false
        "POST chats/{room}/messages/{message}/processed",  # the interrupt consumes it
        "band_trio.adapter",
        "band_trio.claim",
    ], names
    claim = one(children(found, turn), "band_trio.claim")
    assert (claim.attributes or {})["band.claim.outcome"] == "claimed"
    (claim_call,) = children(found, claim)
    assert claim_call.name == "POST chats/{room}/messages/{message}/processing"
    assert claim_call.kind is SpanKind.CLIENT
    assert (claim_call.attributes or {})["http.response.status_code"] == 200
    assert (claim_call.attributes or {})[
        "url.path"
    ] == f"chats/{room}/messages/{message}/processing"

    adapter = one(children(found, turn), "band_trio.adapter")
    assert (adapter.attributes or {})["band.cancelled"] is True
    assert (adapter.attributes or {})["gen_ai.operation.name"] == "invoke_agent"
    assert adapter.status.status_code is StatusCode.UNSET
    (stop,) = children(found, adapter)
    assert stop.name == "band_trio.remote_stop"
    stop_attributes = dict(stop.attributes or {})
    assert stop_attributes["band.remote_stop.outcome"] == "confirmed"
    assert stop_attributes["band.remote_stop.name"] == "job"
    assert stop_attributes["band.remote_stop.handle"] == f"task-{message}"
    assert stop_attributes["band.remote_stop.took_seconds"] >= 0
    assert stop_attributes["band.remote_stop.waited_seconds"] >= 0
    assert peer.stopped == [f"task-{message}"]
    assert {span.context.trace_id for span in tree(found, turn) if span.context} == {
        turn.context.trace_id if turn.context else 0
    }


async def test_a_stopped_turn_leaves_its_message_and_a_play_runs_it_in_a_new_trace(
    platform: Platform, spans: InMemorySpanExporter
) -> None:
    agent_id, room, user = seeded(platform)
    peer = Peer()
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, remote_work(peer), policy=FAST) as running:
            message = platform.post_message(room, user, "work")
            await peer.started.wait()
            # the keep-alive's first answer first, or the stop may reach the turn as it
            await platform.wait_until(lambda: platform.working.get((agent_id, room), False))
            platform.send_control(agent_id, "stop", room_id=room, reason="hold on")
            await running.agent.wait_until(lambda: running.agent.remote_stops.sent == 1)
            await running.agent.wait_until(lambda: not running.agent.rooms[room].running)
            assert status(platform, message) == "processing"  # left for the replay
            quick = platform.post_message(room, user, "quick")
            platform.send_control(agent_id, "play", room_id=room)
            await platform.wait_until(lambda: status(platform, quick) == "processed")
            assert status(platform, message) == "processed"  # replayed first, then done
    found = spans.get_finished_spans()
    first, replay = turn_spans(found, message)
    assert (first.attributes or {})["band.turn.outcome"] == "aborted"
    (signal,) = [event for event in first.events if event.name == "band.signal"]
    assert (signal.attributes or {})["band.signal.kind"] == "stop"
    names = {span.name for span in tree(found, first)}
    assert "POST chats/{room}/messages/{message}/processed" not in names  # a stop marks nothing
    assert "band_trio.remote_stop" in names
    assert (replay.attributes or {})["band.turn.outcome"] == "succeeded"
    (after,) = turn_spans(found, quick)
    assert (after.attributes or {})["band.turn.outcome"] == "succeeded"
    assert not [event for event in after.events if event.name == "band.signal"]
    assert after.context and first.context and after.context.trace_id != first.context.trace_id
    posted = {span.name for span in tree(found, after)}
    assert "POST chats/{room}/messages" in posted  # the reply
    assert "POST chats/{room}/messages/{message}/processed" in posted


async def test_a_failed_turn_is_an_error_span_with_the_adapters_exception(
    platform: Platform, spans: InMemorySpanExporter
) -> None:
    _, room, user = seeded(platform)

    async def broken(turn: Turn) -> None:
        raise RuntimeError("the model is down")

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(broken), policy=FAST):
            message = platform.post_message(room, user, "hello")
            await platform.wait_until(lambda: status(platform, message) == "failed")
    found = spans.get_finished_spans()
    (turn,) = turn_spans(found, message)
    assert (turn.attributes or {})["band.turn.outcome"] == "failed"
    assert turn.status.status_code is StatusCode.ERROR
    assert "the model is down" in (turn.status.description or "")
    adapter = one(children(found, turn), "band_trio.adapter")
    assert adapter.status.status_code is StatusCode.ERROR
    assert [event.name for event in adapter.events] == ["exception"]


async def test_tracing_off_records_nothing_and_the_gauges_leave_with_the_agent(
    platform: Platform,
) -> None:
    """With no provider (band-trio's or a global SDK one), every hook is the shared
    no-op: the same turn runs and no tracer is made. The agent's gauges are sampled
    while it runs, and not after."""
    _, room, user = seeded(platform)
    assert hooks.tracer() is None
    sampled = observe.REGISTRY.sources
    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(), policy=FAST):
            message = platform.post_message(room, user, "hello")
            await platform.wait_until(lambda: status(platform, message) == "processed")
            during = observe.REGISTRY.render().decode()
    after = observe.REGISTRY.render().decode()
    assert observe.REGISTRY.sources == sampled  # the agent removed its own
    assert hooks.tracer() is None
    assert hooks.step("anything") is hooks.step("anything else")
    assert "\nband_trio_rooms 1\n" in during and "\nband_trio_connected 1\n" in during
    assert "\nband_trio_rooms 0\n" in after and "\nband_trio_connected 0\n" in after


async def test_an_asyncio_frameworks_spans_nest_under_the_turns_adapter_call(
    platform: Platform, spans: InMemorySpanExporter
) -> None:
    import asyncio

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from band_trio.contract import run_asyncio

    _, room, user = seeded(platform)
    framework = TracerProvider()  # the framework's own tracer, exporting to the same place
    framework.add_span_processor(SimpleSpanProcessor(spans))

    async def graph_step() -> str:  # an asyncio framework, tracing with OpenTelemetry
        with framework.get_tracer("a.framework").start_as_current_span("framework.step"):
            await asyncio.sleep(0)
            return "stepped"

    async def behaviour(turn: Turn) -> None:
        await turn.reply(await run_asyncio(graph_step))

    with trio.fail_after(DEADLINE):
        async with running_agent(platform, Recorder(behaviour), policy=FAST):
            message = platform.post_message(room, user, "go")
            await platform.wait_until(lambda: status(platform, message) == "processed")
    found = spans.get_finished_spans()
    (turn,) = turn_spans(found, message)
    step = one(found, "framework.step")
    adapter = one(tree(found, turn), "band_trio.adapter")
    assert step.parent is not None and adapter.context is not None
    assert step.parent.span_id == adapter.context.span_id  # nested under the turn's call
    assert step.context is not None and step.context.trace_id == adapter.context.trace_id
