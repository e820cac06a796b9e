"""The metrics themselves, without a server: names and labels as Prometheus wants them
(read back by its own parser), label values that agree with the runtime's enums,
nothing undeclared becoming a series, and an abandoned thread counted while it runs."""

from __future__ import annotations

import threading
import typing

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from band_trio import Turn, observe
from band_trio.contract import StopOutcome, TurnControl, run_in_thread
from band_trio.observe import _instruments as m
from band_trio.observe import hooks as hooks
from band_trio.runs._run import RunStatus
from band_trio.runtime import AbortKind
from band_trio.runtime._settle import Outcome
from band_trio.wire import AgentControl

HIGH_CARDINALITY = {"room", "room_id", "message", "message_id", "correlation_id", "agent", "run"}


def test_every_family_follows_prometheus_conventions() -> None:
    text = observe.REGISTRY.render().decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    ours = observe.REGISTRY.families()
    assert len(families) == len(ours)  # every family parsed, none merged into another
    for family in ours:
        assert family.name.startswith("band_trio_") and family.name == family.name.lower()
        assert family.help.endswith(".") and len(family.help) > 20
        if family.kind == "counter":
            assert family.name.endswith("_total")
        if family.kind == "histogram":
            assert family.name.endswith("_seconds")
        assert not set(family.label_names) & HIGH_CARDINALITY
        for values in family._declared:
            assert len(values) <= 8
        parsed = families[family.name.removesuffix("_total")]
        assert parsed.type == family.kind
        assert parsed.documentation == family.help


def test_label_values_are_the_runtimes_own() -> None:
    assert set(m.TURN_OUTCOMES) == {outcome.value for outcome in Outcome}
    assert set(m.ABORT_KINDS) == {kind.value for kind in AbortKind}
    assert set(m.STOP_OUTCOMES) == {outcome.value for outcome in StopOutcome}
    terminal = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED}
    assert set(m.RUN_STATUSES) == {status.value for status in terminal}
    mode = typing.get_type_hints(AgentControl)["mode"]
    assert set(m.SIGNAL_MODES) == set(typing.get_args(mode))


def test_an_undeclared_value_is_counted_as_other_never_as_itself() -> None:
    registry = observe.Registry()
    counter = observe.Counter("x_events_total", "Events.", {"kind": ("a", "b")})
    registry.register(counter)
    for odd in ("c", "room-1234", 'quote"d', "new\nline"):
        counter.inc(odd)
    text = registry.render().decode()
    assert 'x_events_total{kind="other"} 4' in text
    assert "room-1234" not in text and "quote" not in text
    assert counter.value("a") == 0 and counter.value("zzz") == 4
    with pytest.raises(ValueError, match="never goes down"):
        counter.inc("a", amount=-1)
    with pytest.raises(TypeError, match="takes labels"):
        counter.inc()


def test_a_histogram_is_cumulative_with_its_sum_and_count() -> None:
    registry = observe.Registry()
    histogram = observe.Histogram("x_wait_seconds", "Waits.\nSecond \\ line.", (0.1, 1.0))
    registry.register(histogram)
    for value in (0.05, 0.1, 0.5, 7.0):
        histogram.observe(value)
    text = registry.render().decode()
    assert "# HELP x_wait_seconds Waits.\\nSecond \\\\ line.\n" in text
    assert 'x_wait_seconds_bucket{le="0.1"} 2\n' in text
    assert 'x_wait_seconds_bucket{le="1.0"} 3\n' in text
    assert 'x_wait_seconds_bucket{le="+Inf"} 4\n' in text
    assert "x_wait_seconds_count 4\n" in text and "x_wait_seconds_sum 7.65\n" in text
    (family,) = text_string_to_metric_families(text)
    assert family.type == "histogram"


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: observe.Counter("x_events", "No suffix."), "ends in _total"),
        (lambda: observe.Counter("x-events_total", "Dash."), "not a metric name"),
        (lambda: observe.Gauge("x_total", "A counter's suffix."), "counter's suffix"),
        (lambda: observe.Counter("x_total", "Le.", {"le": ("1",)}), "not a label name"),
        (lambda: observe.Counter("x_total", "Empty.", {"kind": ()}), "declared values"),
        (lambda: observe.Histogram("x_seconds", "Unsorted.", (1.0, 0.5)), "increasing"),
    ],
)
def test_a_malformed_instrument_is_refused(make: typing.Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        make()


def test_a_name_is_registered_once() -> None:
    registry = observe.Registry()
    registry.register(observe.Counter("x_total", "Once."))
    with pytest.raises(ValueError, match="registered already"):
        registry.register(observe.Counter("x_total", "Twice."))


def test_sampled_gauges_come_from_the_running_parts_only() -> None:
    before = observe.REGISTRY.render().decode()
    handle = observe.track(lambda: observe.Sample("run", in_progress=2, queued=3))
    try:
        during = observe.REGISTRY.render().decode()
    finally:
        observe.untrack(handle)
    after = observe.REGISTRY.render().decode()
    assert 'band_trio_in_progress{work="run"} 0' in before
    assert 'band_trio_in_progress{work="run"} 2' in during
    assert 'band_trio_queue_depth{queue="runs"} 3' in during
    assert 'band_trio_in_progress{work="run"} 0' in after  # gone with its part


async def test_an_abandoned_thread_is_counted_until_it_returns() -> None:
    release = threading.Event()
    entered = trio.Event()
    token = trio.lowlevel.current_trio_token()
    control = TurnControl("room", "message", stop_grace=0.5)
    turn = Turn(_message(), _NoPort(), control=control)
    total = m.THREADS_ABANDONED_TOTAL.value()
    alive = m.THREADS_ABANDONED.value()

    def blocking() -> str:
        token.run_sync_soon(entered.set)
        release.wait(10)
        return "late"

    with trio.fail_after(10):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def cancel_once_entered() -> None:
                    await entered.wait()
                    control.aborted("interrupt", None)
                    scope.cancel()

                nursery.start_soon(cancel_once_entered)
                await run_in_thread(turn, blocking)
        assert m.THREADS_ABANDONED_TOTAL.value() == total + 1
        assert m.THREADS_ABANDONED.value() == alive + 1  # still running
        release.set()
        while m.THREADS_ABANDONED.value() != alive:  # the thread returns on its own, soon
            await trio.to_thread.run_sync(lambda: None)  # a round trip, not a sleep
    assert m.THREADS_ABANDONED_TOTAL.value() == total + 1


class _NoPort:
    """A turn's platform port that is never called here."""

    def __getattr__(self, name: str) -> typing.Any:
        raise AssertionError(f"the port's {name} was called")


def _message() -> typing.Any:
    from band_trio.contract import Message

    return Message(id="message", room_id="room", content="x", sender_id="u",
                   sender_type="User", sender_name="U")  # fmt: skip


def test_a_collector_that_never_answers_holds_the_exit_for_trace_flush_at_most() -> None:
    """The spans still queued at exit get `trace_flush`, however the collector behaves
    (here an exporter that hangs on every export); then tracing is off anyway."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    release = threading.Event()
    exported = threading.Event()

    class Hanging(SpanExporter):
        def export(self, spans: typing.Any) -> SpanExportResult:
            exported.set()
            release.wait(30)
            return SpanExportResult.FAILURE

    policy = observe.ObservePolicy(trace_flush=0.2, trace_delay=0.01)
    tracing = observe.trace_to(Hanging(), service="test", policy=policy)
    try:
        with hooks.step("band_trio.test"):
            pass
        assert exported.wait(10)  # the export is under way, and hangs
        assert tracing.close() is False  # given up after trace_flush
        assert hooks.tracer() is None
    finally:
        release.set()


def test_a_long_attribute_is_cut_to_the_policy() -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    policy = observe.ObservePolicy(trace_attribute_chars=32, trace_delay=0.01)
    tracing = observe.trace_to(exporter, service="test", policy=policy)
    try:
        with hooks.step("band_trio.test") as step:
            step.set("band.signal.reason", "x" * 10_000)  # a reason a 16 MiB frame can hold
    finally:
        assert tracing.close()
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["band.signal.reason"] == "x" * 32
