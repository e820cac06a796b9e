"""The local test peers behave as the real ones do: A2A (a2a-sdk 1.3), OpenAI SSE.

The shared peers (tests/peers/shared.py) are the same servers: each test here uses one,
except where a request is left hanging (a swallowed CancelTask), which starts its own."""

from __future__ import annotations

import json
import time
import uuid
from contextlib import aclosing
from typing import Any

import httpx2
import trio

from peers import a2a_peer, shared_a2a_peer, shared_stubllm_peer
from support import early_close

V1 = {"A2A-Version": "1.0"}
TERMINAL_STATES = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}

# httpx2 2.16.2: AsyncResponseStream.__aiter__ (httpx2/_transports/default.py) iterates the
# httpcore2 PoolByteStream without closing its generator, so a response left before its end
# drops that generator unexhausted and trio's finalizer warns (an error under
# filterwarnings=error). Only the tests that close a stream early need this.


def send_params(text: str, **configuration: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
    }
    if configuration:
        params["configuration"] = configuration
    return params


def rpc(method: str, params: dict[str, Any], rpc_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


class Frames:
    """SSE ``data:`` frames of a streamed response, read from ``aiter_bytes()``.

    Not ``aiter_lines()``: in httpx2 2.16 it does not close the ``aiter_text()`` and
    ``aiter_bytes()`` generators inside it, so leaving it early makes trio warn
    (ResourceWarning) when they are collected; ``aiter_bytes`` closes ``aiter_raw`` itself.
    """

    def __init__(self, response: httpx2.Response) -> None:
        self._chunks = response.aiter_bytes()
        self._buffer = b""

    async def aclose(self) -> None:
        await self._chunks.aclose()

    async def next(self) -> dict[str, Any] | None:
        """The next frame as JSON (``{"done": True}`` for ``[DONE]``), or None at EOF."""
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                if line.startswith(b"data:"):
                    data = line[5:].strip()
                    return {"done": True} if data == b"[DONE]" else json.loads(data)
            chunk = await anext(self._chunks, None)
            if chunk is None:
                return None
            self._buffer += chunk


# -- A2A ----------------------------------------------------------------------------------------


async def test_a2a_stream_cancel_task_gives_canceled_on_stream_and_in_reply() -> None:
    async with shared_a2a_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        body = rpc("SendStreamingMessage", send_params("mode=normal chunks=40 delay=0.05"), 1)
        async with client.stream("POST", peer.url, json=body, headers=V1) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async with aclosing(Frames(response)) as lines:
                first = await lines.next()
                assert first is not None
                task_id = first["result"]["task"]["id"]
                assert first["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
                artifacts = 0
                while artifacts < 2:
                    frame = await lines.next()
                    assert frame is not None
                    artifacts += "artifactUpdate" in frame["result"]

                sent = time.perf_counter()
                reply = await client.post(
                    peer.url, json=rpc("CancelTask", {"id": task_id}, 2), headers=V1
                )
                replied = time.perf_counter()
                assert reply.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"

                states = []
                while (frame := await lines.next()) is not None:
                    if "statusUpdate" in frame["result"]:
                        states.append(frame["result"]["statusUpdate"]["status"]["state"])
                eof = time.perf_counter()
        assert states == ["TASK_STATE_CANCELED"]

        request = await peer.wait_for(event="cancel_request", task_id=task_id)
        assert request["protocol"] == "jsonrpc-1.0"
        await peer.wait_for(event="cancel_called", task_id=task_id)
        cancelled = await peer.wait_for(event="executor_cancelled", task_id=task_id)
        terminal = await peer.wait_for(event="terminal", task_id=task_id)
        assert terminal["state"] == "TASK_STATE_CANCELED"
        assert not cancelled["swallowed"]
        print(
            f"\nA2A CancelTask: sent->server saw {1000 * (request['perf'] - sent):.2f} ms,"
            f" sent->executor cancelled {1000 * (cancelled['perf'] - sent):.2f} ms,"
            f" sent->reply {1000 * (replied - sent):.2f} ms,"
            f" sent->stream EOF {1000 * (eof - sent):.2f} ms"
        )


async def test_a2a_silent_stream_ends_without_terminal_event() -> None:
    async with shared_a2a_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        body = rpc("SendStreamingMessage", send_params("mode=silent chunks=40 delay=0.05"), 1)
        async with (
            client.stream("POST", peer.url, json=body, headers=V1) as response,
            aclosing(Frames(response)) as lines,
        ):
            first = await lines.next()
            assert first is not None
            task_id = first["result"]["task"]["id"]
            await peer.wait_for(event="chunk_sent", task_id=task_id)
            reply = await client.post(
                peer.url, json=rpc("CancelTask", {"id": task_id}, 2), headers=V1
            )
            assert reply.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
            rest = []
            while (frame := await lines.next()) is not None:
                rest.append(frame)
        states = [
            f["result"]["statusUpdate"]["status"]["state"]
            for f in rest
            if "statusUpdate" in f["result"]
        ]
        # EOF without a terminal event: the SDK wrote CANCELED to the store itself.
        assert TERMINAL_STATES.isdisjoint(states), states
        terminal = await peer.wait_for(event="terminal", task_id=task_id)
        assert terminal["state"] == "TASK_STATE_CANCELED"


async def test_a2a_stubborn_cancel_is_refused_and_task_fails() -> None:
    async with shared_a2a_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        params = send_params("mode=stubborn chunks=40 delay=0.05", returnImmediately=True)
        task = (await client.post(peer.url, json=rpc("SendMessage", params, 1), headers=V1)).json()
        task_id = task["result"]["task"]["id"]
        await peer.wait_for(event="chunk_sent", task_id=task_id)
        reply = (
            await client.post(peer.url, json=rpc("CancelTask", {"id": task_id}, 2), headers=V1)
        ).json()
        assert reply["error"]["code"] == -32002
        assert reply["error"]["data"][0]["reason"] == "TASK_NOT_CANCELABLE"
        await peer.wait_for(event="cancel_refused", task_id=task_id)
        terminal = await peer.wait_for(event="terminal", task_id=task_id)
        assert terminal["state"] == "TASK_STATE_FAILED"

        # A task that already finished is not cancelable either (mode=quick).
        done = (
            await client.post(
                peer.url, json=rpc("SendMessage", send_params("mode=quick"), 3), headers=V1
            )
        ).json()
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        again = (
            await client.post(
                peer.url,
                json=rpc("CancelTask", {"id": done["result"]["task"]["id"]}, 4),
                headers=V1,
            )
        ).json()
        assert again["error"]["code"] == -32002


async def test_a2a_swallow_cancel_task_does_not_answer() -> None:
    async with a2a_peer(stop_timeout=4) as peer, httpx2.AsyncClient(timeout=5) as client:
        params = send_params("mode=swallow chunks=100 delay=0.05", returnImmediately=True)
        task = (await client.post(peer.url, json=rpc("SendMessage", params, 1), headers=V1)).json()
        task_id = task["result"]["task"]["id"]
        await peer.wait_for(event="chunk_sent", task_id=task_id)
        with trio.move_on_after(1) as waited:
            await client.post(peer.url, json=rpc("CancelTask", {"id": task_id}, 2), headers=V1)
        assert waited.cancelled_caught, "CancelTask answered although the executor swallowed it"
        await peer.wait_for(event="cancel_request", task_id=task_id)
        swallowed = await peer.wait_for(event="executor_cancelled", task_id=task_id)
        assert swallowed["swallowed"]
        mark = peer.mark()
        await peer.wait_for(event="chunk_sent", task_id=task_id, since=mark)  # keeps going
        assert peer.find(event="terminal", task_id=task_id) is None


async def test_a2a_message_mode_answers_without_a_task() -> None:
    async with shared_a2a_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        params = send_params("mode=message hello")
        reply = (await client.post(peer.url, json=rpc("SendMessage", params, 1), headers=V1)).json()
        assert "task" not in reply["result"]
        message = reply["result"]["message"]
        assert message["role"] == "ROLE_AGENT"
        assert message["parts"] == [{"text": "echo: mode=message hello"}]
        await peer.wait_for(event="message_sent")
        await peer.wait_for(event="response_end", jsonrpc_id=1)
        assert peer.events("task_created") == []


async def test_a2a_return_immediately_returns_the_first_task_at_once() -> None:
    async with shared_a2a_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        card = (await client.get(peer.url + ".well-known/agent-card.json")).json()
        assert card["capabilities"]["streaming"] is True
        # 30 s of work, cancelled below: "at once" is a bound with room for a loaded CI
        # machine's slow first answer (it was < 1 s of 2 s of work)
        params = send_params("mode=normal chunks=300 delay=0.1", returnImmediately=True)
        start = time.perf_counter()
        reply = await client.post(peer.url, json=rpc("SendMessage", params, 1), headers=V1)
        elapsed = time.perf_counter() - start
        task = reply.json()["result"]["task"]
        assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        assert elapsed < 10.0  # the work itself takes 30 s
        print(f"\nA2A SendMessage returnImmediately: {1000 * elapsed:.1f} ms")
        # The work goes on in the background.
        await peer.wait_for(event="chunk_sent", task_id=task["id"], index=1)
        assert peer.find(event="terminal", task_id=task["id"]) is None
        # 0.3 compat name on the same endpoint (no A2A-Version header).
        compat = await client.post(peer.url, json=rpc("tasks/cancel", {"id": task["id"]}, 2))
        assert compat.json()["result"]["status"]["state"] == "canceled"
        request = await peer.wait_for(event="cancel_request", task_id=task["id"])
        assert request["protocol"] == "jsonrpc-0.3"


# -- stubllm (OpenAI-compatible SSE) --------------------------------------------------------------


def chat(text: str, *history: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    return {
        "model": "gpt-4o",
        "stream": stream,
        "messages": [{"role": "user", "content": text}, *history],
    }


@early_close
async def test_stubllm_client_close_cancels_the_server_generator() -> None:
    async with shared_stubllm_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        url = peer.base_url + "/chat/completions"
        async with (
            client.stream("POST", url, json=chat("[slow] count")) as response,
            aclosing(Frames(response)) as lines,
        ):
            for _ in range(3):
                frame = await lines.next()
                assert frame is not None
                assert frame["choices"][0]["delta"]["content"].startswith("w0")
            closed = time.perf_counter()  # the response closes on leaving the block
        cancelled = await peer.wait_for(event="stream_cancelled", timeout=3)
        assert cancelled["how"] == "cancelled"
        assert cancelled["count"] < 80
        # cancelled before the stream's end (count < 80, no stream_completed): a bound
        # that scales with the machine; a wall-clock one (< 500 ms) would not at load 10
        latency_ms = 1000 * (cancelled["perf"] - closed)
        print(f"\nstubllm: client close -> server generator cancelled {latency_ms:.2f} ms")
        assert peer.find(event="stream_completed") is None
        match = await peer.wait_for(event="match")
        assert match["fixture"] == "slow"


async def test_stubllm_tool_call_then_plain_answer() -> None:
    async with shared_stubllm_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        url = peer.base_url + "/chat/completions"
        frames = []
        async with (
            client.stream("POST", url, json=chat("[tool] weather?")) as response,
            aclosing(Frames(response)) as lines,
        ):
            while (frame := await lines.next()) is not None:
                frames.append(frame)
        assert frames[-1] == {"done": True}
        calls = [c for f in frames[:-1] for c in f["choices"][0]["delta"].get("tool_calls", [])]
        assert calls == [
            {
                "index": 0,
                "id": "call_lookup_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"query": "weather"}'},
            }
        ]
        assert frames[-2]["choices"][0]["finish_reason"] == "tool_calls"

        tool_call = {k: v for k, v in calls[0].items() if k != "index"}
        history = [
            {"role": "assistant", "content": None, "tool_calls": [tool_call]},
            {"role": "tool", "tool_call_id": "call_lookup_1", "content": "sunny"},
        ]
        second = await client.post(url, json=chat("[tool] weather?", *history, stream=False))
        answer = second.json()["choices"][0]
        assert answer["message"]["content"] == "the tool said: sunny"
        assert answer["finish_reason"] == "stop"

        matches = [e["fixture"] for e in peer.events("match")]
        assert matches == ["tool-call", "tool-result"]
        requests = peer.events("request")
        assert requests[1]["body"]["messages"][1:] == history
        await peer.wait_for(event="stream_completed", req=1)
