"""The JSON-RPC peer alone (`_jsonrpc.JsonRpcPeer`), over in-memory streams: the child's
requests are handled off the reader, bounded; a closed peer fails what waits on it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from band_trio.adapters._jsonrpc import JsonRpcPeer, RpcFault
from band_trio.adapters._rpc_codecs import LineCodec


class Gone(Exception):
    pass


class Refused(Exception):
    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(f"{method}: {code} {message}")
        self.code = code


class Child:
    """The other end: what the peer wrote, and a way to write to it."""

    def __init__(self, to_peer: trio.abc.SendStream, from_peer: trio.abc.ReceiveStream) -> None:
        self.to_peer = to_peer
        self.from_peer = from_peer
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        await self.to_peer.send_all(json.dumps(message).encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            self._buffer += await self.from_peer.receive_some()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


@asynccontextmanager
async def peer(
    on_request: Any = None, outbox: int = 8, notes: list[Any] | None = None
) -> AsyncIterator[tuple[JsonRpcPeer, Child]]:
    down_send, down_receive = trio.testing.memory_stream_one_way_pair()
    up_send, up_receive = trio.testing.memory_stream_one_way_pair()
    rpc = JsonRpcPeer(
        down_send,
        up_receive,
        LineCodec(1024),
        name="the child",
        on_notification=lambda method, params: (notes or []).append((method, params)),
        on_request=on_request,
        outbox=outbox,
        gone=Gone,
        refused=Refused,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(rpc.serve)
        yield rpc, Child(up_send, down_receive)
        nursery.cancel_scope.cancel()  # as the supervisor ends it


async def test_a_request_that_waits_does_not_hold_up_the_answer_to_ours() -> None:
    release = trio.Event()

    async def on_request(method: str, params: dict[str, Any]) -> Any:
        if method == "ask":
            await release.wait()  # a person's answer, say
            return {"outcome": "yes"}
        raise RpcFault(-32601, f"no {method}")

    with trio.fail_after(5):
        async with peer(on_request) as (rpc, child):
            async with trio.open_nursery() as nursery:
                await child.send({"jsonrpc": "2.0", "id": 0, "method": "ask", "params": {}})
                answer: list[Any] = []

                async def call() -> None:
                    answer.append(await rpc.request("session/new", {"cwd": "/"}))

                nursery.start_soon(call)
                ours = await child.receive()
                assert ours["method"] == "session/new"
                await child.send({"jsonrpc": "2.0", "id": ours["id"], "result": {"s": 1}})
            assert answer == [{"s": 1}]  # answered while the child's request still waits
            release.set()
            assert await child.receive() == {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {"outcome": "yes"},
            }
            await child.send({"jsonrpc": "2.0", "id": "x", "method": "nope", "params": {}})
            refusal = await child.receive()
            assert refusal["id"] == "x" and refusal["error"]["code"] == -32601


async def test_requests_past_the_bound_are_answered_busy_and_closing_cancels_the_rest() -> None:
    entered: list[str] = []
    cancelled: list[str] = []

    async def on_request(method: str, params: dict[str, Any]) -> Any:
        entered.append(method)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(method)
            raise

    with trio.fail_after(5):
        async with peer(on_request, outbox=2) as (rpc, child):
            for i in range(3):
                await child.send({"jsonrpc": "2.0", "id": i, "method": f"m{i}", "params": {}})
            busy = await child.receive()
            assert busy["id"] == 2 and busy["error"]["code"] == -32000
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(entered) == ["m0", "m1"]
            await child.to_peer.aclose()  # the child's stdout ends
            await rpc.closed.wait()
            with pytest.raises(Gone, match="the child closed its stdout"):
                await rpc.request("late", {})
    assert sorted(cancelled) == ["m0", "m1"]


async def test_a_pending_call_fails_when_the_child_goes_and_an_error_answer_is_refused() -> None:
    with trio.fail_after(5):
        async with peer() as (rpc, child):
            async with trio.open_nursery() as nursery:
                failed: list[BaseException] = []

                async def call(method: str) -> None:
                    try:
                        await rpc.request(method, {})
                    except (Gone, Refused) as exc:
                        failed.append(exc)

                nursery.start_soon(call, "refused")
                first = await child.receive()
                error = {"code": -32602, "message": "bad"}
                await child.send({"jsonrpc": "2.0", "id": first["id"], "error": error})
                nursery.start_soon(call, "pending")
                await child.receive()
                await child.send({"jsonrpc": "2.0", "id": 999, "result": None})  # to nothing
                await child.send({"jsonrpc": "2.0", "method": "note", "params": {"a": 1}})
                await child.to_peer.aclose()
            [refused, gone] = failed
            assert isinstance(refused, Refused) and refused.code == -32602
            assert isinstance(gone, Gone)
