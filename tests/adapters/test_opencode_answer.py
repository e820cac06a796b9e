"""Which of a session's events make the OpenCode adapter's answer (`Answer`), from a
trace recorded against the real `opencode serve` 1.18.33 at load 3-6.

OpenCode queues each event for a `GET /event` subscriber by reference and writes it
(`JSON.stringify`) only when the stream reaches it, and it mutates a message in place
before publishing it again. On a loaded machine the run of a quick prompt is over
before the stream writes its first events: the assistant message's first
`message.updated`, published when the message was created, then arrives with
`time.completed` and `finish` already set. The answer took a message first seen
completed for a previous run's late update, dropped its text, and the turn failed
with "OpenCode's answer had no text" (the conformance probe "a stop after the remote
work finished sends nothing", about 1 run in 20 at load 3). Which messages are the
prompt's is read from OpenCode's ids instead: each assistant message names the user
message it answers (`parentID`), and ids ascend, so the prompt's user message is the
newest one the session shows.

The adapter against the real server is in test_opencode.py, which shows this only by
chance; here the trace is replayed, to `Answer` and to the adapter by a scripted server.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import h11
import trio

from band_trio.adapters._opencode import OpenCodeAdapter
from band_trio.adapters._opencode_events import Answer
from band_trio.platform import Platform
from support import errors_posted, replies, running_agent, seeded, settled

S = "ses_dc9063ac2ffeccKXsNPsBbd3C7"
USER = "msg_236f9c57900122ZFlFWV27Nyxh"
ASSISTANT = "msg_236f9c5b3001e4B1UZ7WN8olEp"
TEXT = "prt_236f9c5ef001lP23F00S6orA7Z"
OLD_USER = "msg_236f9a1c2001Q0lDnEwsIAPnts"  # an earlier prompt of the same session
OLD_ASSISTANT = "msg_236f9a1c9001kIu1o4aR9XWmQz"
OLD_TEXT = "prt_236f9a1d0001Vq9LVJ1Ye5BqaC"


def event(kind: str, **properties: Any) -> dict[str, Any]:
    return {"type": kind, "properties": {"sessionID": S, **properties}}


def status(state: str) -> dict[str, Any]:
    return event("session.status", status={"type": state})


def message(id: str, role: str, parent: str | None = None, **info: Any) -> dict[str, Any]:
    body = {"id": id, "role": role, "sessionID": S, "time": {"created": 1}, **info}
    if parent:
        body["parentID"] = parent
    return event("message.updated", info=body)


def done(id: str, parent: str, **info: Any) -> dict[str, Any]:
    """An assistant message as OpenCode writes it once its run is over."""
    return message(id, "assistant", parent, time={"created": 1, "completed": 2}, **info)


def part(id: str, message: str, kind: str = "text", text: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"id": id, "messageID": message, "sessionID": S, "type": kind}
    if text is not None:
        body["text"] = text
    return event("message.part.updated", part=body)


def delta(id: str, message: str, text: str) -> dict[str, Any]:
    return event("message.part.delta", messageID=message, partID=id, field="text", delta=text)


def quick_run() -> list[dict[str, Any]]:
    """The events of "[quick] hi" that failed (one prompt in a new session), as written:
    the assistant message's first update already shows it completed."""
    return [
        event("session.updated", info={"id": S, "title": "r42"}),
        message(USER, "user"),
        part("prt_236f9c580001YqW0O2SqpQwbwS", USER, text="[quick] hi"),
        event("session.updated", info={"id": S, "title": "r42"}),
        status("busy"),
        done(ASSISTANT, USER, finish="stop"),  # its creation, written after its end
        status("busy"),
        part("prt_236f9c5eb001zlj5NXBet7zLuA", ASSISTANT, "step-start"),
        part(TEXT, ASSISTANT, text=""),
        delta(TEXT, ASSISTANT, "quic"),
        delta(TEXT, ASSISTANT, "k "),
        delta(TEXT, ASSISTANT, "answ"),
        delta(TEXT, ASSISTANT, "er"),
        part(TEXT, ASSISTANT, text="quick answer"),
        part("prt_236f9c609001yoR8NMteiCVSM9", ASSISTANT, "step-finish"),
        done(ASSISTANT, USER, finish="stop"),
        done(ASSISTANT, USER, finish="stop"),
        status("busy"),
        status("idle"),
    ]


def answered(events: list[dict[str, Any]]) -> Answer:
    answer = Answer(max_retries=2)
    for each in events:
        assert not answer.done
        answer.add(each)
    assert answer.done and answer.failure is None
    return answer


def test_a_message_first_written_completed_is_still_the_prompts_answer() -> None:
    assert answered(quick_run()).text() == "quick answer"


def test_a_previous_runs_late_updates_are_not_taken_for_the_answer() -> None:
    """The updates of an earlier run that trail into this turn's subscription (an
    aborted run finishing, its user message's summary), before this prompt's message
    and while its run is busy, with and without an error: none of their text counts."""
    aborted = {"error": {"name": "MessageAbortedError"}}
    late = [
        message(OLD_USER, "user", summary={"diffs": []}),
        done(OLD_ASSISTANT, OLD_USER),
        part(OLD_TEXT, OLD_ASSISTANT, text="w00 w01 w02"),
    ]
    run = quick_run()
    events = [*late, *run[:5], *late, run[5]]
    events += [done(OLD_ASSISTANT, OLD_USER, **aborted), delta(OLD_TEXT, OLD_ASSISTANT, " w03")]
    events += [message(OLD_ASSISTANT, "assistant", OLD_USER), *run[6:]]
    assert answered(events).text() == "quick answer"


def test_every_message_answering_the_prompt_counts_in_order() -> None:
    """A run with a tool call has two assistant messages, both answering the prompt."""
    second, text = "msg_236f9c6a1001ZzS8wE4m3nQy1K", "prt_236f9c6a5001bD0Qz0Wv7xW4s1"
    run = quick_run()
    events = [*run[:-2], done(second, USER), part(text, second, text="and more"), *run[-2:]]
    assert answered(events).text() == "quick answer\n\nand more"


# -- the adapter, against a server that writes the trace ------------------------------


class ScriptedOpenCode:
    """Just enough of `opencode serve` over loopback HTTP/1.1 for one prompt: a session,
    `GET /event`, and once the prompt is in, `events` written to every subscriber."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.prompted = trio.Event()
        self.requests: list[str] = []

    async def serve(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        while True:
            request = await self._next(connection, stream)
            if request is None:
                return
            while not isinstance(await self._next(connection, stream), h11.EndOfMessage):
                pass  # the body (a prompt's text): what the script sends does not depend on it
            target = request.target.decode()
            self.requests.append(f"{request.method.decode()} {target}")
            if target.startswith("/event"):
                await self._events(connection, stream)
                return
            status, body = 200, json.dumps({"id": S}).encode()  # POST /session
            if target.endswith("/prompt_async"):
                status, body = 204, b""
                self.prompted.set()
            head = [("content-length", str(len(body)))] if status != 204 else []
            await self._send(connection, stream, h11.Response(status_code=status, headers=head))
            await self._send(connection, stream, h11.Data(data=body))
            await self._send(connection, stream, h11.EndOfMessage())
            connection.start_next_cycle()

    async def _events(self, connection: h11.Connection, stream: trio.SocketStream) -> None:
        head = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
        await self._send(connection, stream, h11.Response(status_code=200, headers=head))
        connected = {"type": "server.connected", "properties": {}}
        await self._send(connection, stream, h11.Data(data=self._frame(connected)))
        await self.prompted.wait()
        for each in self.events:
            await self._send(connection, stream, h11.Data(data=self._frame(each)))
        await trio.sleep_forever()  # as OpenCode: the stream stays open (the client ends it)

    @staticmethod
    def _frame(event: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(event)}\n\n".encode()

    @staticmethod
    async def _next(connection: h11.Connection, stream: trio.SocketStream) -> Any:
        while (got := connection.next_event()) is h11.NEED_DATA:
            data = await stream.receive_some()
            connection.receive_data(data)
            if not data:
                return None
        return None if got is h11.ConnectionClosed else got

    @staticmethod
    async def _send(connection: h11.Connection, stream: trio.SocketStream, event: Any) -> None:
        await stream.send_all(connection.send(event) or b"")


async def test_the_adapter_replies_with_a_run_whose_message_was_first_written_completed(
    platform: Platform,
) -> None:
    _, room, user = seeded(platform)
    server = ScriptedOpenCode(quick_run())
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, server.serve, 0, host="127.0.0.1")
            )
            port = listeners[0].socket.getsockname()[1]
            adapter = OpenCodeAdapter(
                f"http://127.0.0.1:{port}", provider_id="stub", model_id="gpt-4o"
            )
            async with running_agent(platform, adapter):
                message = platform.post_message(room, user, "[quick] hi")
                await platform.wait_until(lambda: settled(platform, message))
            nursery.cancel_scope.cancel()
    assert errors_posted(platform, room) == []
    assert replies(platform, room) == ["quick answer"]
    assert server.requests == ["POST /session", "GET /event", f"POST /session/{S}/prompt_async"]
