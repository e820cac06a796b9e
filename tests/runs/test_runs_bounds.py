"""What a hostile or careless client cannot do to the runs API: pass with a second
key, crash it with an event id, hold its shutdown by never reading, skip an id, or
read token counts that were never measured."""

from __future__ import annotations

import contextlib
import signal

import httpx2
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from band_trio.contract import Adapter, Turn
from band_trio.runs import RunsPolicy, open_runs_api
from band_trio.runs._app import _last_event_id
from band_trio.runs._events import EventLog
from band_trio.server import HttpError

from .conftest import AUTH, DEADLINE, JSON, KEY, Scripted, serve
from .test_cli import _serve


async def test_two_authorization_headers_are_refused_even_if_one_is_right(
    scripted: Scripted,
) -> None:
    async with serve(scripted) as api:
        both = [("authorization", "Bearer wrong"), ("authorization", f"Bearer {KEY}")]
        for headers in (both, both[::-1]):
            async with httpx2.AsyncClient(base_url=api.server.url, headers=JSON) as bare:
                answer = await bare.post("/v1/runs", json={"input": "hi"}, headers=headers)
            assert answer.status_code == 401
            assert answer.json()["error"]["code"] == "invalid_api_key"
        assert api.service.runs == {}


@given(value=st.binary(max_size=40) | st.text(max_size=40).map(str.encode))
def test_any_last_event_id_is_an_id_or_a_400(value: bytes) -> None:
    scope = {"headers": [(b"last-event-id", value)]}
    if value.strip().isdigit() and len(value.strip()) <= 18:
        assert _last_event_id(scope) == int(value.strip())
    else:
        with pytest.raises(HttpError) as refused:
            _last_event_id(scope)
        assert refused.value.status == 400


@pytest.mark.parametrize(
    "value",
    ["9" * 5000, "1" * 19, "-1", "+1", "1 2", "0x10", "1e3", "", "١٢", "²", "3.0"],
)
async def test_a_malformed_last_event_id_is_400_never_500(scripted: Scripted, value: str) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("hi")
        await api.settled(run_id)
        answer = await api.client.get(
            f"/v1/runs/{run_id}/events", headers={"last-event-id": value.encode()}
        )
        assert answer.status_code == 400, value[:20]
        assert "Traceback" not in answer.text
        two = [("last-event-id", "1"), ("last-event-id", "2")]
        assert (await api.client.get(f"/v1/runs/{run_id}/events", headers=two)).status_code == 400


class Unencodable(Adapter):
    """Says one thing that cannot be encoded (a lone surrogate), then one that can."""

    async def on_turn(self, turn: Turn) -> None:
        with contextlib.suppress(UnicodeEncodeError):
            await turn.send_event("\ud800", message_type="status")
        await turn.reply("fine")


async def test_ids_stay_contiguous_when_an_event_fails_to_encode() -> None:
    async with (
        open_runs_api(Unencodable(), api_key=KEY) as server,
        httpx2.AsyncClient(base_url=server.url, headers={**AUTH, **JSON}) as client,
    ):
        run_id = (await client.post("/v1/runs", json={"input": "x"})).json()["run_id"]
        with trio.fail_after(DEADLINE):
            await server.service.runs[run_id].settled.wait()
        body = (await client.get(f"/v1/runs/{run_id}/events")).text
    ids = [int(line[4:]) for line in body.splitlines() if line.startswith("id: ")]
    assert ids == [1, 2]  # message.delta, run.completed: nothing used up by the failure


async def test_usage_is_null_until_it_is_measured(scripted: Scripted) -> None:
    async with serve(scripted) as api:
        run_id = await api.start("hi")
        await api.settled(run_id)
        assert (await api.status(run_id))["usage"] is None
        stream = await api.events(run_id)
        assert stream.events[-1]["event"] == "run.completed"
        assert stream.events[-1]["usage"] is None


def test_a_subscriber_takes_the_log_a_chunk_at_a_time() -> None:
    log = EventLog("run", limit=100)
    for n in range(50):
        log.emit("status.update", text=str(n) * 100)
    frames = log.batch(0, 1000)
    assert 1 <= len(frames) < 50 and sum(len(f) for _, f in frames) <= 1000
    assert [i for i, _ in frames] == list(range(1, len(frames) + 1))
    rest = log.batch(frames[-1][0], 10**9)
    assert [i for i, _ in rest] == list(range(len(frames) + 1, 51))
    assert log.batch(0, 1) == [(1, log.batch(0, 10**9)[0][1])]  # always one, however big
    shared = log.batch(0, 10**9)[0][1]
    assert log.batch(0, 10**9)[0][1] is shared  # the log's own bytes, never a copy
    assert log.batch(50, 1000) == []


async def test_sigterm_with_subscribers_that_never_read_exits_0() -> None:
    """Ten subscribers follow a run with a 10 MiB event log and never read a byte:
    every write to them stalls. SIGTERM still stops the run and exits 0 (it took 8 s
    and exited 1 before writes were bounded)."""
    process, url = await _serve("--adapter", "chatty:adapter")
    streams: list[trio.SocketStream] = []
    try:
        assert process.stderr is not None
        async with httpx2.AsyncClient(base_url=url, headers={**AUTH, **JSON}) as client:
            run_id = (await client.post("/v1/runs", json={"input": "go"})).json()["run_id"]
        port = int(url.rsplit(":", 1)[1])
        request = (
            f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            f"authorization: Bearer {KEY}\r\n\r\n"
        ).encode()
        with trio.fail_after(DEADLINE):  # one reader that keeps up: the log is whole
            async with await trio.open_tcp_stream("127.0.0.1", port) as reader:
                await reader.send_all(request)
                seen = b""
                while b"said it all" not in seen:
                    seen = seen[-64:] + await reader.receive_some()
        for _ in range(10):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(request)
            head = b""
            with trio.fail_after(DEADLINE):
                while b"\r\n\r\n" not in head:
                    head += await stream.receive_some(1)
            assert head.startswith(b"HTTP/1.1 200")
            streams.append(stream)  # ...and never read again: the 10 MiB stall
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(DEADLINE):
            code = await process.wait()
        err = (await process.stderr.receive_some(65536)).decode()
        assert code == 0, err
        assert "Traceback" not in err
    finally:
        for stream in streams:
            await stream.aclose()
        if process.returncode is None:
            process.kill()
            await process.wait()


def test_the_server_policy_is_checked() -> None:
    with pytest.raises(ValueError, match="server"):
        RunsPolicy(server=3)  # type: ignore[arg-type]
