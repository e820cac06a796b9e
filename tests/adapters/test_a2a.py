"""The A2A adapter against a real a2a-sdk 1.3.0 server, driven by a real agent.

Every test runs the embedded platform and an agent over loopback, and the
a2a-sdk peer (src/band_trio/bench/_peers/a2a_server.py) in its own process. What the peer
did — each request, each `CancelTask`, each task's terminal state — is the
server's own record (`peer.events(...)`), not an inference from the client.

Two cases need the peer's answer held on its way back, or a peer that only
speaks 0.3; the a2a-sdk server can do neither by itself (its first event is
sent as soon as the task exists, and it serves 1.0 and 0.3 side by side). For
those a `Front` stands between the adapter and the peer: a loopback TCP
forwarder that can hold the bytes of one response until released, or answer
1.0 methods itself with the JSON-RPC error a 0.3-only server gives. The task
is still the real peer's.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio

from band_trio import Policy, StopOutcome, Turn, UpstreamPolicy
from band_trio.adapters import A2AAdapter, a2a
from band_trio.adapters._a2a import streaming_in_card
from band_trio.adapters._a2a_rpc import Rpc
from band_trio.adapters._a2a_wire import (
    V03,
    V1,
    A2AProtocolError,
    A2ARpcError,
    Answer,
    decode,
    event_of,
    result_of,
)
from band_trio.bench._peers.fault_proxy import read_request
from band_trio.contract import RemoteStop
from band_trio.errors import ConfigurationError
from band_trio.platform import Platform
from peers import Peer, shared_a2a_peer
from support import client_sockets, replies, rooms_with_the_agent, running_agent, seeded, status

DEADLINE = 20
FAST = Policy(backend_stop_grace=0.5)

# httpx2 2.16.2 leaves httpcore2's body generator unclosed when a response is closed before
# its end (see tests/peers/test_peers.py); trio's finalizer warns when it is collected.
early_close = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpcore2._async.connection_pool.PoolByteStream.__aiter__'"
    " was garbage collected:ResourceWarning"
)


class Observed(A2AAdapter):
    """The adapter, recording per message the remote stops its turn made (for the test)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stops: dict[str, tuple[RemoteStop, ...]] = {}
        self.cancelled_at: dict[str, float] = {}
        self._changed = trio.Event()

    async def on_turn(self, turn: Turn) -> None:
        try:
            await super().on_turn(turn)
        except trio.Cancelled:
            self.cancelled_at[turn.message.id] = time.perf_counter()
            raise
        finally:
            self.stops[turn.message.id] = turn.remote_stops
            self._changed.set()
            self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._changed.wait()


def processed(platform: Platform, message: str) -> Callable[[], bool]:
    return lambda: status(platform, message) == "processed"


def calls(peer: Peer, method: str | None = None) -> list[dict[str, Any]]:
    """The JSON-RPC requests the peer received (optionally only those of `method`)."""
    found = [e for e in peer.events("request") if e["path"] == "/" and e["method"]]
    return [e for e in found if method is None or e["method"] == method]


def cancelled_tasks(peer: Peer) -> list[str]:
    return [e["task_id"] for e in peer.events("cancel_request")]


async def streaming_task(peer: Peer, chunks: int = 2, since: int = 0) -> str:
    """Wait for a task (after event `since`) to have streamed `chunks` chunks; its id."""
    started = await peer.wait_for(event="execute_started", since=since, timeout=DEADLINE)
    task_id = str(started["task_id"])
    await peer.wait_for(
        lambda e: e["index"] >= chunks - 1, event="chunk_sent", task_id=task_id, timeout=DEADLINE
    )
    return task_id


# -- a front that holds a response or refuses 1.0 ---------------------------------------


class Front:
    """A loopback TCP forwarder to the peer (see the module).

    `hold`: the response to a request whose bytes contain it waits for `release()`
    (`held` is set once one does). `refuse`: a JSON-RPC error code answered, with
    `connection: close`, to every request for a 1.0 (PascalCase) method."""

    def __init__(self, upstream: int, *, hold: bytes | None = None, refuse: int | None = None):
        self.upstream = upstream
        self.hold = hold
        self.refuse = refuse
        self.refused: list[str] = []
        self.held = trio.Event()
        self._released = trio.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def release(self) -> None:
        self._released.set()

    async def handle(self, client: trio.SocketStream) -> None:
        async with client:
            request = await _read_request(client)
            if request is None:
                return
            method = _method(request)
            if self.refuse is not None and method[:1].isupper():
                self.refused.append(method)
                await client.send_all(_rpc_error(request, self.refuse))
                return
            upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream)
            async with upstream, trio.open_nursery() as nursery:
                await upstream.send_all(request)
                gated = self.hold is not None and self.hold in request
                nursery.start_soon(self._pump, client, upstream, False, nursery.cancel_scope)
                nursery.start_soon(self._pump, upstream, client, gated, nursery.cancel_scope)

    async def _pump(
        self,
        source: trio.SocketStream,
        sink: trio.SocketStream,
        gated: bool,
        both: trio.CancelScope,
    ) -> None:
        try:
            while data := await source.receive_some(65536):
                if gated:
                    self.held.set()
                    await self._released.wait()
                    gated = False
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            both.cancel()  # either side closing ends the connection


async def _read_request(stream: trio.SocketStream) -> bytes | None:
    """One whole HTTP request (headers and a Content-Length body), as the fault proxy reads it."""
    found = await read_request(stream)
    return None if found is None else found[2]


def _method(request: bytes) -> str:
    body = request.partition(b"\r\n\r\n")[2]
    try:
        return str(json.loads(body).get("method") or "")
    except ValueError:
        return ""


def _rpc_error(request: bytes, code: int) -> bytes:
    rpc_id = json.loads(request.partition(b"\r\n\r\n")[2]).get("id")
    body = json.dumps(
        {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": "Method not found"}}
    ).encode()
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


@asynccontextmanager
async def front_for(peer: Peer, **options: Any) -> AsyncIterator[Front]:
    front = Front(peer.port, **options)
    async with trio.open_nursery() as nursery:
        [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
        front.port = listener.socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, front.handle, [listener])
        try:
            yield front
        finally:
            front.release()
            nursery.cancel_scope.cancel()


# -- answers ------------------------------------------------------------------------


async def test_a_streamed_answer_is_posted_and_the_message_processed(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url)  # streaming: as the agent card says
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "mode=normal chunks=3 delay=0.01")
                await platform.wait_until(processed(platform, message))
                assert client_sockets(peer.port) in (0, None)  # the turn's client is closed
            [send] = calls(peer)
            terminal = await peer.wait_for(event="terminal")
            cards = [e for e in peer.events("request") if "agent-card" in e["path"]]
    assert replies(platform, room) == ["chunk 0 chunk 1 chunk 2"]
    assert adapter.streaming is True and len(cards) == 1
    assert (send["method"], send["a2a_version"]) == ("SendStreamingMessage", "1.0")
    assert send["body"]["params"]["message"]["parts"] == [
        {"text": "mode=normal chunks=3 delay=0.01"}
    ]
    assert terminal["state"] == "TASK_STATE_COMPLETED"
    assert adapter.stops[message] == ()  # the task ended on its own: nothing to stop
    assert cancelled_tasks(peer) == []


async def test_the_context_is_kept_per_room_and_dropped_when_the_room_is_left(
    platform: Platform,
) -> None:
    _, _, user = seeded(platform)
    first_room, other_room = rooms_with_the_agent(platform, 2)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter):
                for room_id, text in [
                    (first_room, "mode=quick one"),
                    (first_room, "mode=quick two"),
                    (other_room, "mode=quick elsewhere"),
                ]:
                    message = platform.post_message(room_id, user, text)
                    await platform.wait_until(processed(platform, message))
                kept = adapter.context_id(first_room)
                await adapter.on_room_left(first_room)
                assert adapter.context_id(first_room) is None
            contexts = [e["context_id"] for e in peer.events("execute_started")]
            sent = [c["body"]["params"]["message"].get("contextId") for c in calls(peer)]
    assert contexts[0] == contexts[1] == kept != contexts[2]
    assert sent == [None, kept, None]
    assert replies(platform, first_room) == ["done", "done"]


async def test_a_plain_message_answer_is_posted_and_there_is_no_task_to_cancel(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "mode=message hello")
                await platform.wait_until(processed(platform, message))
            await peer.wait_for(event="message_sent")
    assert replies(platform, room) == ["echo: mode=message hello"]
    assert [c["method"] for c in calls(peer)] == ["SendStreamingMessage"]
    assert adapter.stops[message] == () and peer.events("task_created") == []


@early_close
async def test_a_failed_task_fails_the_message_and_sends_no_stop(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "mode=fail chunks=2 delay=0.01")
                await platform.wait_until(lambda: status(platform, message) == "failed")
            terminal = await peer.wait_for(event="terminal")
    assert terminal["state"] == "TASK_STATE_FAILED"
    assert replies(platform, room) == []
    assert cancelled_tasks(peer) == [] and adapter.stops[message] == ()


async def test_a_non_streaming_peer_is_sent_the_message_and_polled(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=False, poll_interval=0.05)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "mode=normal chunks=3 delay=0.05")
                await platform.wait_until(processed(platform, message))
                assert client_sockets(peer.port) in (0, None)
            [send] = calls(peer, "SendMessage")
            polls = calls(peer, "GetTask")
    assert send["body"]["params"]["configuration"] == {"returnImmediately": True}
    assert len(polls) >= 2  # the answer came by polling, not by a blocking send
    assert replies(platform, room) == ["chunk 0 chunk 1 chunk 2"]


# -- aborts -------------------------------------------------------------------------


@early_close
async def test_interrupt_mid_stream_cancels_the_task_once_and_the_stop_is_confirmed(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "mode=normal chunks=200 delay=0.02")
                task_id = await streaming_task(peer, chunks=3)
                platform.send_control(agent_id, "interrupt", room_id=room, reason="enough")
                terminal = await peer.wait_for(event="terminal", task_id=task_id)
                await platform.wait_until(processed(platform, message))
                await adapter.wait_for(lambda: message in adapter.stops)
                assert client_sockets(peer.port) in (0, None)
                stats = running.agent.remote_stops
            published = peer.find(event="cancel_published", task_id=task_id)
    assert cancelled_tasks(peer) == [task_id]
    assert terminal["state"] == "TASK_STATE_CANCELED" and published is not None
    [stop] = adapter.stops[message]
    assert (stop.name, stop.handle, stop.outcome) == ("a2a task", task_id, StopOutcome.CONFIRMED)
    assert stop.detail == "task canceled"
    assert (stats.confirmed, stats.sent) == (1, 1)
    assert replies(platform, room) == []


@early_close
async def test_stop_mid_stream_cancels_the_task_keeps_the_message_and_play_answers_it(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    text = "mode=normal chunks=20 delay=0.02"
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, text)
                first = await streaming_task(peer, chunks=3)
                platform.send_control(agent_id, "stop", room_id=room, reason="not now")
                terminal = await peer.wait_for(event="terminal", task_id=first)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert status(platform, message) == "processing"
                assert replies(platform, room) == []
                mark = peer.mark()
                platform.send_control(agent_id, "play", room_id=room)
                await platform.wait_until(processed(platform, message))
            replayed = await peer.wait_for(event="execute_started", since=mark)
            replay = calls(peer)[-1]["body"]["params"]["message"]
    assert terminal["state"] == "TASK_STATE_CANCELED"
    assert replayed["task_id"] != first and cancelled_tasks(peer) == [first]
    assert replayed["context_id"] == peer.events("execute_started")[0]["context_id"]
    assert replay["contextId"] == replayed["context_id"]
    assert replay["metadata"] == {
        "bandTrio": {
            "previousAnswer": {"aborted": "stop", "messageId": message, "reason": "not now"}
        }
    }
    assert replies(platform, room) == [" ".join(f"chunk {i}" for i in range(20))]
    first_stops = [s for s in running.agent.remote_stops.recent if s.handle == first]
    assert [s.outcome for s in first_stops] == [StopOutcome.CONFIRMED]


@early_close
@pytest.mark.parametrize(
    ("mode", "detail"),
    [("stubborn", "refused: Task cannot be canceled (-32002)"), ("swallow", "no answer within")],
)
async def test_a_stop_the_peer_refuses_or_never_answers_is_unconfirmed_within_the_grace(
    platform: Platform, mode: str, detail: str
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter, policy=FAST) as running:
                message = platform.post_message(room, user, f"mode={mode} chunks=200 delay=0.02")
                task_id = await streaming_task(peer, chunks=3)
                sent = trio.current_time()
                platform.send_control(agent_id, "interrupt", room_id=room)
                await peer.wait_for(event="cancel_request", task_id=task_id)
                await platform.wait_until(processed(platform, message))
                settled = trio.current_time() - sent
                later = platform.post_message(room, user, "mode=quick next")
                await platform.wait_until(processed(platform, later))
                assert client_sockets(peer.port) in (0, None)  # the hung CancelTask's too
                stats = running.agent.remote_stops
            refused = peer.find(event="cancel_refused", task_id=task_id)
            swallowed = peer.find(event="executor_cancelled", task_id=task_id, swallowed=True)
    [stop] = adapter.stops[message]
    assert stop.outcome is StopOutcome.UNCONFIRMED and stop.detail.startswith(detail)
    assert stop.took < 0.5 + 0.2 and settled < 0.5 + 1.0  # the grace bounds it; nothing waits on
    assert stats.unconfirmed == 1 and cancelled_tasks(peer) == [task_id]
    assert (refused, swallowed) != (None, None)  # the peer really refused / swallowed it
    assert replies(platform, room) == ["done"]  # the room's next message was answered


@early_close
async def test_a_silent_peer_is_confirmed_by_the_cancel_reply_though_the_stream_shows_no_end(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "mode=silent chunks=200 delay=0.02")
                task_id = await streaming_task(peer, chunks=3)
                platform.send_control(agent_id, "interrupt", room_id=room)
                terminal = await peer.wait_for(event="terminal", task_id=task_id)
                await platform.wait_until(processed(platform, message))
                await adapter.wait_for(lambda: message in adapter.stops)
            published = peer.find(event="cancel_published", task_id=task_id)
    assert terminal["state"] == "TASK_STATE_CANCELED" and published is None
    [stop] = adapter.stops[message]
    assert (stop.outcome, stop.detail) == (StopOutcome.CONFIRMED, "task canceled")


@early_close
async def test_a_stop_before_the_first_event_cancels_the_task_once_its_id_is_known(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer, front_for(peer, hold=b"[hold]") as front:
            adapter = Observed(front.url, streaming=True)
            policy = Policy(backend_stop_grace=2.0)
            async with running_agent(platform, adapter, policy=policy) as running:
                text = "[hold] mode=normal chunks=200 delay=0.02"
                message = platform.post_message(room, user, text)
                started = await peer.wait_for(event="execute_started", timeout=DEADLINE)
                await front.held.wait()  # the task exists; its first event is held back
                platform.send_control(agent_id, "stop", room_id=room)
                await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
                assert cancelled_tasks(peer) == []  # nothing can be cancelled before the id
                front.release()
                terminal = await peer.wait_for(event="terminal", task_id=started["task_id"])
                await adapter.wait_for(lambda: message in adapter.stops)
                assert status(platform, message) == "processing"
    assert terminal["state"] == "TASK_STATE_CANCELED"
    assert cancelled_tasks(peer) == [started["task_id"]]
    [stop] = adapter.stops[message]
    assert stop.outcome is StopOutcome.CONFIRMED and stop.waited > 0
    assert replies(platform, room) == []


@early_close
async def test_a_stop_before_a_polled_answer_cancels_the_task(platform: Platform) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=False, poll_interval=0.05)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "mode=normal chunks=200 delay=0.02")
                task_id = await streaming_task(peer, chunks=2)
                await peer.wait_for(event="request", method="GetTask")  # polling: no answer yet
                platform.send_control(agent_id, "stop", room_id=room)
                terminal = await peer.wait_for(event="terminal", task_id=task_id)
                room_state = running.agent.rooms[room]
                await running.agent.wait_until(lambda: room_state.running is None)
                assert status(platform, message) == "processing"
    assert terminal["state"] == "TASK_STATE_CANCELED"
    assert cancelled_tasks(peer) == [task_id]
    assert [s.outcome for s in adapter.stops[message]] == [StopOutcome.CONFIRMED]
    assert replies(platform, room) == []


async def test_a_task_that_finished_is_not_cancelled_by_a_later_interrupt(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=True)
            async with running_agent(platform, adapter) as running:
                hold = platform.faults.hold_rest("post_message", room_id=room)
                message = platform.post_message(room, user, "mode=quick")
                await hold.arrived.wait()  # the task is done; its answer is being posted
                terminal = await peer.wait_for(event="terminal")
                platform.send_control(agent_id, "interrupt", room_id=room)
                await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
                hold.release()
                await platform.wait_until(processed(platform, message))
                await adapter.wait_for(lambda: message in adapter.stops)
    assert terminal["state"] == "TASK_STATE_COMPLETED"
    assert message in adapter.cancelled_at  # the turn was aborted ...
    assert cancelled_tasks(peer) == [] and adapter.stops[message] == ()  # ... and sent nothing


@early_close
async def test_an_interrupt_while_a_plain_message_answer_is_on_its_way_sends_nothing(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer, front_for(peer, hold=b"[hold]") as front:
            adapter = Observed(front.url, streaming=True)
            async with running_agent(platform, adapter) as running:
                message = platform.post_message(room, user, "[hold] mode=message hi")
                await front.held.wait()
                await peer.wait_for(event="message_sent")
                platform.send_control(agent_id, "interrupt", room_id=room)
                await running.agent.wait_until(lambda: running.agent.signals.applied == 1)
                front.release()
                await platform.wait_until(processed(platform, message))
                await adapter.wait_for(lambda: message in adapter.stops)
    assert adapter.stops[message] == () and cancelled_tasks(peer) == []
    assert [c["method"] for c in calls(peer)] == ["SendStreamingMessage"]
    assert replies(platform, room) == []


# -- protocol 0.3 ---------------------------------------------------------------------


@early_close
@pytest.mark.parametrize("code", [-32601, -32009])
async def test_a_peer_that_refuses_1_0_is_spoken_to_in_0_3_and_still_cancelled(
    platform: Platform, code: int
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer, front_for(peer, refuse=code) as front:
            adapter = Observed(front.url, streaming=True)
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "mode=normal chunks=200 delay=0.02")
                task_id = await streaming_task(peer, chunks=3)
                platform.send_control(agent_id, "interrupt", room_id=room)
                terminal = await peer.wait_for(event="terminal", task_id=task_id)
                await platform.wait_until(processed(platform, message))
                later = platform.post_message(room, user, "mode=quick again")
                await platform.wait_until(processed(platform, later))
                await adapter.wait_for(lambda: message in adapter.stops)
            [cancel] = peer.events("cancel_request")
    assert front.refused == ["SendStreamingMessage"]  # once: 0.3 from then on
    assert adapter.dialect is V03
    assert [c["method"] for c in calls(peer)] == [
        "message/stream",
        "tasks/cancel",
        "message/stream",
    ]
    assert all(c["a2a_version"] is None for c in calls(peer))
    assert (cancel["task_id"], cancel["protocol"]) == (task_id, "jsonrpc-0.3")
    assert terminal["state"] == "TASK_STATE_CANCELED"
    assert [s.outcome for s in adapter.stops[message]] == [StopOutcome.CONFIRMED]
    assert replies(platform, room) == ["done"]


@early_close
async def test_a_0_3_peer_is_polled_with_blocking_false_and_a_stop_cancels_the_task(
    platform: Platform,
) -> None:
    agent_id, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with shared_a2a_peer() as peer:
            adapter = Observed(peer.url, streaming=False, protocol="0.3", poll_interval=0.05)
            async with running_agent(platform, adapter):
                done = platform.post_message(room, user, "mode=normal chunks=2 delay=0.02")
                await platform.wait_until(processed(platform, done))
                message = platform.post_message(room, user, "mode=normal chunks=200 delay=0.02")
                task_id = await streaming_task(peer, chunks=2, since=peer.mark())
                platform.send_control(agent_id, "interrupt", room_id=room)
                terminal = await peer.wait_for(event="terminal", task_id=task_id)
                await platform.wait_until(processed(platform, message))
            sends = calls(peer, "message/send")
    assert [s["body"]["params"]["configuration"] for s in sends] == [{"blocking": False}] * 2
    assert {c["method"] for c in calls(peer)} == {"message/send", "tasks/get", "tasks/cancel"}
    assert terminal["state"] == "TASK_STATE_CANCELED" and cancelled_tasks(peer) == [task_id]
    assert [s.outcome for s in adapter.stops[message]] == [StopOutcome.CONFIRMED]
    assert replies(platform, room) == ["chunk 0 chunk 1"]


# -- the wire, without a server -------------------------------------------------------


def frame(result: dict[str, Any]) -> Any:
    return event_of(result_of({"jsonrpc": "2.0", "id": 1, "result": result}, "a frame"))


def test_artifact_chunks_append_or_replace_and_the_terminal_state_ends_the_answer() -> None:
    answer = Answer()
    task = {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}
    answer.add(frame({"task": task}))
    for text, append in [("a", False), ("b", True), ("X", False), ("Y", True)]:
        update = {"taskId": "t", "artifact": {"artifactId": "1", "parts": [{"text": text}]}}
        answer.add(frame({"artifactUpdate": {**update, "append": append}}))
    update = {"taskId": "t", "artifact": {"artifactId": "2", "parts": [{"text": "second"}]}}
    answer.add(frame({"artifactUpdate": {**update, "lastChunk": True}}))
    before = answer.over
    completed = {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}}
    answer.add(frame({"statusUpdate": completed}))
    assert (before, answer.over, answer.state, answer.context_id) == (False, True, "completed", "c")
    assert answer.text() == "XY\n\nsecond"


def test_0_3_frames_are_read_too_and_final_ends_the_answer() -> None:
    answer = Answer()
    answer.add(frame({"kind": "task", "id": "t", "status": {"state": "submitted"}}))
    status = {"kind": "status-update", "taskId": "t", "final": True}
    question = {"parts": [{"kind": "text", "text": "which one?"}]}
    answer.add(frame({**status, "status": {"state": "input-required", "message": question}}))
    assert answer.over and answer.state == "input-required" and answer.text() == "which one?"


def test_the_dialects_shape_the_message_and_the_method_names() -> None:
    assert V1.message("hi", "m", context_id="c") == {
        "messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "contextId": "c",
    }  # fmt: skip
    assert V03.message("hi", "m", task_id="t") == {
        "kind": "message", "messageId": "m", "role": "user",
        "parts": [{"kind": "text", "text": "hi"}], "taskId": "t",
    }  # fmt: skip
    assert (V1.cancel, V1.headers, V03.cancel, V03.headers) == (
        "CancelTask", {"A2A-Version": "1.0"}, "tasks/cancel", {},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"data: nope", "is not JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"jsonrpc": "2.0", "id": 1}', "neither a JSON-RPC result nor an error"),
        (b'{"result": {"task": {"status": {"state": "x"}}}}', "task.id must be"),
        (b'{"result": {"statusUpdate": {"taskId": "t"}}}', "statusUpdate.status must be"),
        (b'{"result": {"task": {}, "message": {}}}', "none (or several)"),
        (b'{"result": {"kind": "weird"}}', "unknown kind"),
        (b'{"result": {"message": {"parts": "text"}}}', "message.parts must be a JSON array"),
        (b'{"error": {"message": "no code"}}', "no integer code"),
    ],
)
def test_a_malformed_frame_is_a_clear_protocol_error(raw: bytes, says: str) -> None:
    with pytest.raises(A2AProtocolError, match=says.replace("(", r"\(").replace(")", r"\)")):
        event_of(result_of(decode(raw, "a frame"), "a frame"))


def test_a_json_rpc_error_keeps_its_code() -> None:
    body = {"error": {"code": -32002, "message": "Task cannot be canceled"}}
    with pytest.raises(A2ARpcError) as caught:
        result_of(body, "an answer")
    assert (caught.value.code, str(caught.value)) == (-32002, "Task cannot be canceled (-32002)")


def test_the_agent_card_decides_streaming_and_an_unreadable_one_means_streaming() -> None:
    assert streaming_in_card({"capabilities": {"streaming": False}}) is False
    assert streaming_in_card({"capabilities": {"streaming": True}}) is True
    assert streaming_in_card({"capabilities": {}}) is True
    assert streaming_in_card(None) is True


def fake_peer(cancel: dict[str, Any], states: list[str]) -> httpx2.AsyncClient:
    """A client whose peer answers CancelTask with `cancel` and each GetTask with the next
    of `states` (the last one repeated)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        rpc = json.loads(request.content)
        if rpc["method"] == "CancelTask":
            return httpx2.Response(200, json={"jsonrpc": "2.0", "id": rpc["id"], **cancel})
        state = states.pop(0) if len(states) > 1 else states[0]
        task = {"id": "t", "status": {"state": state}}
        return httpx2.Response(200, json={"jsonrpc": "2.0", "id": rpc["id"], "result": task})

    return httpx2.AsyncClient(transport=httpx2.MockTransport(answer))


def task_in(state: str) -> dict[str, Any]:
    return {"result": {"id": "t", "status": {"state": state}}}


def rpc_error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


@pytest.mark.parametrize(
    ("cancel", "states", "expected"),
    [
        (task_in("TASK_STATE_CANCELED"), ["x"], (StopOutcome.CONFIRMED, "task canceled")),
        (
            task_in("TASK_STATE_WORKING"),
            ["TASK_STATE_WORKING", "TASK_STATE_CANCELED"],
            (StopOutcome.CONFIRMED, "task canceled"),
        ),
        (
            task_in("TASK_STATE_WORKING"),
            ["TASK_STATE_WORKING"],
            (StopOutcome.REQUESTED, "accepted; the task is working"),
        ),
        (
            rpc_error(-32002, "Task cannot be canceled"),
            ["TASK_STATE_FAILED"],
            (
                StopOutcome.UNCONFIRMED,
                "refused: Task cannot be canceled (-32002); the task is failed now",
            ),
        ),
        (
            rpc_error(-32001, "Task not found"),
            ["x"],
            (StopOutcome.REQUESTED, "already gone: Task not found (-32001)"),
        ),
    ],
)
async def test_the_cancel_answer_decides_the_stop_outcome(
    cancel: dict[str, Any], states: list[str], expected: tuple[StopOutcome, str]
) -> None:
    async with fake_peer(cancel, states) as client:
        rpc = Rpc(client, "http://127.0.0.1:9/", V1, poll_interval=0.01, upstream=UpstreamPolicy())
        with trio.fail_after(1):
            with trio.move_on_after(0.5):  # the stop's grace, as the runtime sets it
                outcome = await rpc.cancel("t")
    assert outcome == expected


async def test_a_cancel_that_fails_otherwise_raises_so_the_stop_is_unconfirmed() -> None:
    async with fake_peer(rpc_error(-32603, "boom"), ["x"]) as client:
        rpc = Rpc(client, "http://127.0.0.1:9/", V1, poll_interval=0.01, upstream=UpstreamPolicy())
        with pytest.raises(A2ARpcError, match="boom"):
            await rpc.cancel("t")


# -- configuration --------------------------------------------------------------------


def test_a2a_reads_its_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAND_A2A_URL", "http://127.0.0.1:9/a2a/")
    monkeypatch.setenv("BAND_A2A_STREAMING", "no")
    monkeypatch.setenv("BAND_A2A_PROTOCOL", "0.3")
    monkeypatch.setenv("BAND_A2A_POLL_INTERVAL", "0.5")
    adapter = a2a()
    assert (adapter.url, adapter.card_url) == (
        "http://127.0.0.1:9/a2a/",
        "http://127.0.0.1:9/.well-known/agent-card.json",
    )
    assert (adapter.streaming, adapter.dialect, adapter.poll_interval) == (False, V03, 0.5)
    for name in ("BAND_A2A_STREAMING", "BAND_A2A_PROTOCOL", "BAND_A2A_POLL_INTERVAL"):
        monkeypatch.delenv(name)
    adapter = a2a()
    assert (adapter.streaming, adapter.dialect, adapter.poll_interval) == (None, V1, 0.2)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("BAND_A2A_URL", "", "BAND_A2A_URL is not set"),
        ("BAND_A2A_URL", "127.0.0.1:9/", "BAND_A2A_URL"),
        ("BAND_A2A_STREAMING", "maybe", "BAND_A2A_STREAMING"),
        ("BAND_A2A_PROTOCOL", "2.0", "BAND_A2A_PROTOCOL"),
        ("BAND_A2A_POLL_INTERVAL", "soon", "BAND_A2A_POLL_INTERVAL"),
        ("BAND_A2A_POLL_INTERVAL", "0", "BAND_A2A_POLL_INTERVAL"),
    ],
)
def test_a_missing_or_bad_setting_is_a_one_line_configuration_error(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, says: str
) -> None:
    monkeypatch.setenv("BAND_A2A_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=says) as caught:
        a2a()
    assert "\n" not in str(caught.value)
