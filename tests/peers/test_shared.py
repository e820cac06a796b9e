"""A shared peer cannot be told from a test's own: each view sees only its test's events,
numbered as a fresh peer would number them, and is handed out only once the peer is quiet."""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from peers import PeerError, shared_a2a_peer, shared_stubllm_peer
from peers import shared as shared_module

V1 = {"A2A-Version": "1.0"}


def chat(text: str) -> dict[str, Any]:
    return {"model": "stub", "stream": False, "messages": [{"role": "user", "content": text}]}


def send(text: str, rpc_id: int) -> dict[str, Any]:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    params = {"message": message, "configuration": {"returnImmediately": True}}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "SendMessage", "params": params}


async def test_a_second_view_of_stubllm_sees_only_its_own_requests_numbered_from_1() -> None:
    async with shared_stubllm_peer() as first, httpx2.AsyncClient(timeout=5) as client:
        for _ in range(2):
            reply = await client.post(f"{first.base_url}/chat/completions", json=chat("[quick]"))
            assert reply.status_code == 200
        await first.wait_for(event="response_end", req=2)
    async with shared_stubllm_peer() as second, httpx2.AsyncClient(timeout=5) as client:
        assert second.pid == first.pid
        assert second.events() == []
        await client.post(f"{second.base_url}/chat/completions", json=chat("[quick]"))
        ended = await second.wait_for(event="response_end")
        assert ended["req"] == 1
        assert [e["req"] for e in second.events("request")] == [1]


async def test_a_peer_with_a_request_still_open_is_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shared_module, "QUIET_WITHIN", 0.2)
    monkeypatch.setattr(shared_module, "QUIET_AFTER", 0.2)
    async with httpx2.AsyncClient(timeout=5) as client, shared_stubllm_peer() as first:
        body = {**chat("[slow]"), "stream": True}
        async with client.stream("POST", f"{first.base_url}/chat/completions", json=body):
            await first.wait_for(event="chunk")
            async with shared_stubllm_peer() as second:
                # The first view's stream was still open: a new peer, not a shared one.
                assert second.pid != first.pid
                assert second.events() == []
    assert first.process.poll() is not None, "the replaced peer was killed and reaped"


async def test_a_peer_that_died_is_replaced() -> None:
    async with shared_stubllm_peer(chunk_delay_ms=7) as first:
        first.process.kill()
        first.process.wait()  # a Popen: reaped here, so the peer is seen to have exited
    async with shared_stubllm_peer(chunk_delay_ms=7) as second:
        assert second.pid != first.pid and second.process.poll() is None


async def test_work_that_outlives_its_request_stays_out_of_the_next_view() -> None:
    async with shared_a2a_peer() as first, httpx2.AsyncClient(timeout=5) as client:
        answer = await client.post(
            first.url, json=send("mode=normal chunks=8 delay=0.05", 1), headers=V1
        )
        task_id = answer.json()["result"]["task"]["id"]
        await first.wait_for(event="chunk_sent", task_id=task_id)
    async with shared_a2a_peer() as second:
        assert second.pid == first.pid
        # The task goes on in the peer after the first view ended: its events are the
        # peer's, not the second view's.
        await first.wait_for(event="terminal", task_id=task_id)
        assert second.find(task_id=task_id) is None
        assert second.events("chunk_sent") == [] and second.events("terminal") == []


async def test_the_stateful_sequence_fixture_is_refused_on_a_shared_stubllm() -> None:
    async with shared_stubllm_peer() as peer, httpx2.AsyncClient(timeout=5) as client:
        await client.post(f"{peer.base_url}/chat/completions", json=chat("[sequence]"))
        with pytest.raises(PeerError, match=r"\[sequence\].*stubllm_peer\(\)"):
            await peer.wait_for(event="response_end")


KILLED_WORKER = """
import os, signal, sys, trio
sys.path.insert(0, {tests!r})
from peers import shared_stubllm_peer

async def main():
    async with shared_stubllm_peer(chunk_delay_ms=9) as peer:
        print(peer.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no finally: as a crashed worker

trio.run(main)
"""


async def test_a_shared_peer_exits_by_itself_when_its_worker_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(KILLED_WORKER.format(tests=str(Path(__file__).parents[1])))
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, str(script)], capture_stdout=True, check=False
        )
        assert done.returncode == -signal.SIGKILL
        pid = int(done.stdout.split()[0])
        try:
            exits = os.pidfd_open(pid)  # readable once the process has exited
        except ProcessLookupError:
            return  # gone already
        try:
            await trio.lowlevel.wait_readable(exits)
        finally:
            os.close(exits)
