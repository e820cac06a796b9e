"""The OpenAI chat adapter in a run, against a real stubllm in its own process: a stop
closes the upstream stream (stubllm's own record of its generator being cancelled),
and the session's next run tells the model why its last answer was cut off."""

from __future__ import annotations

import json
from typing import Any

import trio

from band_trio.adapters import OpenAIChatAdapter, Tool
from band_trio.bench._peer import Peer
from band_trio.contract import Turn

from .conftest import DEADLINE, serve, stubllm


def _url(peer: Peer) -> str:
    return str(peer.ready["base_url"])


def _progress(req: int, chunks: int) -> Any:
    return lambda e: e.get("event") == "chunk" and e.get("req") == req and e["count"] >= chunks


async def test_stop_closes_the_upstream_stream_on_stubllms_side() -> None:
    async with stubllm() as peer, serve(OpenAIChatAdapter(_url(peer), "gpt-4o")) as api:
        since = len(peer.events)
        run_id = await api.start("[slow] tell me a story", session_id="story")
        with trio.fail_after(DEADLINE):
            started = await peer.wait(since, lambda e: e.get("event") == "stream_started")
            req = started["req"]
            await peer.wait(since, _progress(req, 3))
        async with api.subscribe(run_id) as stream:
            response = await api.stop(run_id, "too long", wait=True)
            cancelled = await stream.until("run.cancelled")
        body = response.json()
        assert body["status"] == "cancelled" and body["remote_stop"] == "requested"
        assert [s["name"] for s in body["remote_stops"]] == ["chat completion"]
        # the request it stopped, not a Python repr ("<Response [200 OK]>")
        assert body["remote_stops"][0]["handle"] == f"POST {_url(peer)}/chat/completions"
        assert cancelled["cancel_reason"] == "too long"
        with trio.fail_after(DEADLINE):  # stubllm's own record: its generator stopped
            gone = await peer.wait(
                since, lambda e: e.get("event") == "stream_cancelled" and e["req"] == req
            )
        assert gone["count"] < 80  # cut off, not read to its end
        assert not [e for e in peer.events[since:] if e.get("event") == "stream_completed"], (
            "the stopped stream ran to its end"
        )

        # the session's next run: the model is told its answer was stopped, and why
        since = len(peer.events)
        following = await api.start("[quick] and now?", session_id="story")
        with trio.fail_after(DEADLINE):
            request = await peer.wait(since, lambda e: e.get("event") == "request")
        await api.stop(following, wait=True)  # (stubllm answers it with [slow] again)
        messages = request["body"]["messages"]
        notes = [m["content"] for m in messages if m["role"] == "system"]
        assert any("stopped by the user (reason: too long)" in n for n in notes), messages


async def test_a_stop_before_any_request_reaches_no_model() -> None:
    """Stopped while it waits for its session's turn, the run never opens a stream."""
    gate = trio.Event()

    class Held(OpenAIChatAdapter):
        async def on_turn(self, turn: Turn) -> None:
            if "hold" in turn.message.content:
                await gate.wait()
            await super().on_turn(turn)

    async with stubllm() as peer, serve(Held(peer.ready["base_url"], "gpt-4o")) as api:
        since = len(peer.events)
        holding = await api.start("[quick] hold", session_id="s")
        queued = await api.start("[slow] never sent", session_id="s")
        stopped = (await api.stop(queued, "changed my mind", wait=True)).json()
        assert stopped["status"] == "cancelled" and stopped["remote_stop"] is None
        gate.set()
        await api.settled(holding)
        with trio.fail_after(DEADLINE):
            await peer.wait(since, lambda e: e.get("event") == "stream_completed")
        requests = [e for e in peer.events[since:] if e.get("event") == "request"]
        bodies = [json.dumps(e["body"]) for e in requests]
        assert len(requests) == 1 and "never sent" not in bodies[0]


async def test_tool_calls_are_tool_events() -> None:
    async def lookup(arguments: dict[str, Any], turn: Turn) -> str:
        return f"weather for {arguments['query']}: sunny"

    tool = Tool("lookup", "look something up", {"type": "object", "properties": {}}, lookup)
    async with (
        stubllm() as peer,
        serve(OpenAIChatAdapter(_url(peer), "gpt-4o", tools=[tool])) as api,
    ):
        run_id = await api.start("[tool] what is the weather?")
        stream = await api.events(run_id)
    assert stream.names == ["tool.started", "tool.completed", "message.delta", "run.completed"]
    started, completed = stream.events[0], stream.events[1]
    assert started["tool"] == completed["tool"] == "lookup"
    assert started["preview"].startswith("lookup(")
    assert completed["error"] is False and completed["duration"] >= 0
    assert stream.events[-1]["output"] == "the tool said: sunny"
