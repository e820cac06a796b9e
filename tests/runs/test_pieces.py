"""Unit tests of one piece at a time: the request checks, the event log, the policy,
and the service's retention window under a mock clock (time is not measured here)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import msgspec
import pytest
import trio

from band_trio.runs import Draining, RunsPolicy, RunsService, RunStatus
from band_trio.runs._events import EventLog
from band_trio.runs._request import BadRequest, HistoryEntry, RunRequest, parse_run, parse_stop

from .conftest import Scripted


def _body(value: object) -> bytes:
    return msgspec.json.encode(value)


def test_input_as_messages_takes_the_last_user_message() -> None:
    request = parse_run(
        _body(
            {
                "input": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": "second"},
                ],
                "conversation_history": [{"role": "user", "content": "long ago"}],
                "session_id": "s",
            }
        )
    )
    assert request.input == "second"
    assert request.history == (
        HistoryEntry("User", "long ago"),
        HistoryEntry("System", "be brief"),
        HistoryEntry("User", "first"),
        HistoryEntry("Agent", "ok"),
    )
    assert request.session_id == "s" and request.on_disconnect == "continue"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "Invalid JSON"),
        (b"[1]", "Invalid JSON"),
        (b"[" * 100_000, "Invalid JSON: nested too deeply"),
        (b'{"a":' * 100_000, "Invalid JSON: nested too deeply"),
        (b'{"input": 5}', "'input' must be"),
        (b'{"input": "x", "conversation_history": [{"role": "bot"}]}', "conversation_history[0]"),
        (b'{"input": "x", "conversation_history": "no"}', "'conversation_history' must be"),
        (b'{"input": "x", "session_id": ""}', "'session_id' must be"),
        (b'{"input": "x", "session_id": 3}', "'session_id' must be"),
        (b'{"input": [{"role": "user", "content": " "}]}', "No user message"),
    ],
)
def test_bad_run_bodies(body: bytes, message: str) -> None:
    with pytest.raises(BadRequest, match=message.replace("[", r"\[")):
        parse_run(body)


def test_stop_bodies() -> None:
    assert parse_stop(b"").reason is None
    assert parse_stop(b"{}").reason is None
    assert parse_stop(_body({"reason": "  too\n long  "})).reason == "too long"
    assert len(parse_stop(_body({"reason": "x" * 5000})).reason or "") == 1000
    with pytest.raises(BadRequest):
        parse_stop(_body({"reason": ["no"]}))


def test_the_event_log_is_bounded_and_resumes_after_an_id() -> None:
    log = EventLog("run_1", limit=3)
    for n in range(5):
        log.emit("message.delta", delta=str(n))
    assert (log.first_id, log.last_id) == (3, 5)
    assert [f.split(b"\n")[0] for f in log.after(0)] == [b"id: 3", b"id: 4", b"id: 5"]
    assert [f.split(b"\n")[0] for f in log.after(4)] == [b"id: 5"]
    assert log.after(5) == [] and log.after(99) == []
    log.emit("run.completed", output="")
    assert log.closed
    with pytest.raises(RuntimeError):
        log.emit("message.delta", delta="late")


def test_the_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="stop_wait"):
        RunsPolicy(stop_wait=-1)
    with pytest.raises(ValueError, match="max_concurrent_runs"):
        RunsPolicy(max_concurrent_runs=0)
    assert RunsPolicy().replace(retention=5).retention == 5


async def test_settled_runs_are_forgotten_when_the_window_ends(autojump_clock: object) -> None:
    """Default policy: one hour. A session goes with its last run, and the adapter is
    told (`on_room_left`), so what it kept per session does not grow forever."""
    adapter = Scripted()
    left: list[str] = []

    async def on_room_left(room_id: str) -> None:
        left.append(room_id)

    adapter.on_room_left = on_room_left  # type: ignore[method-assign]
    service = RunsService(adapter, RunsPolicy(max_retained_runs=2))
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        first = service.start(RunRequest("hello", session_id="s"))
        await first.settled.wait()
        assert first.status is RunStatus.COMPLETED
        await trio.sleep(3599)
        assert service.runs == {first.id: first}
        second = service.start(RunRequest("again", session_id="s"))
        await second.settled.wait()
        await first.forgotten.wait()
        assert trio.current_time() == pytest.approx(first.expires_at)
        assert list(service.runs) == [second.id] and "s" in service.sessions
        # evicted before its window when more than max_retained_runs are kept
        third, fourth = (service.start(RunRequest(f"r{n}")) for n in (3, 4))
        await fourth.settled.wait()
        assert second.forgotten.is_set() and not third.forgotten.is_set()
        await trio.testing.wait_all_tasks_blocked()
        assert "s" not in service.sessions and left == ["s"]
        service.close()


async def test_a_run_past_its_deadline_fails(autojump_clock: object) -> None:
    adapter = Scripted()
    service = RunsService(adapter, RunsPolicy(run_deadline=30))
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        run = service.start(RunRequest("wait"))
        await run.settled.wait()
        assert run.status is RunStatus.FAILED
        assert run.error == "the run ran past its 30s deadline"
        assert run.events.last_event == "run.failed"
        service.close()


async def test_a_closing_service_takes_no_run_and_interrupts_the_running(
    autojump_clock: object,
) -> None:
    adapter = Scripted()
    service = RunsService(adapter, RunsPolicy())
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        run = service.start(RunRequest("wait"))
        await adapter.entered.wait()
        service.close()
        with pytest.raises(Draining):
            service.start(RunRequest("late"))
    assert run.status is RunStatus.INTERRUPTED  # Hermes #114774: a shutdown is no stop
    assert run.cancel_reason == "the runs API is shutting down"
    assert service.overrun == []


async def test_the_service_runs_its_adapter_for_as_long_as_it_owns_runs() -> None:
    entered = trio.Event()
    left: list[str] = []

    class Owning(Scripted):
        @asynccontextmanager
        async def _running(self) -> AsyncIterator[None]:
            entered.set()
            try:
                yield
            finally:
                left.append("lifespan() left")

        def lifespan(self) -> AbstractAsyncContextManager[None]:
            return self._running()

    service = RunsService(Owning(), RunsPolicy())
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            assert entered.is_set() and not left
            service.close()
    assert left == ["lifespan() left"]
