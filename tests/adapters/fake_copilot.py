"""A stand-in for the Copilot CLI that misbehaves on purpose (run as a subprocess).

    python fake_copilot.py MODE        # speaks the CLI's framing on stdin/stdout

Modes: `exit` (says why on stderr, exits 3), `garbage` (writes no framing), `silent`
(never answers the handshake), `old` (protocol 2), `flood` (a 9 MiB event and a
request of its own before answering `session.create`), `stubborn` (accepts an abort
but never goes idle), `refuse` (answers an abort `success: false`), `mute` (takes the
first `session.send` and never answers it, nor says anything of it), `normal`.
In every mode a prompt with `[shell]` asks permission to run `touch made-by-the-model`
(`permission.requested`, kind `shell`) and waits for the answer: approved, it makes the
file and answers "ran the tool"; rejected, "the tool was rejected: FEEDBACK"; an abort
while it waits ends the turn aborted (the request is left to the client to settle).
A prompt with `[hold]` starts a turn whose last model call runs until the next
`session.send` to its session arrives.

Mid-turn input, as the real CLI 1.0.102 takes it (observed): a `session.send` with `mode:
"immediate"` during a turn is injected before the turn's next model call — here, the
one after a `[shell]` permission's answer: a `user.message` with `delivery: "steering"`,
then the answer, which says "heard: CONTENT" — or, when the turn has no further model
call (`[hold]`), it is taken up once that call ends, as a queued message (`delivery:
"queued"`) with a model call of its own, before the session goes idle once. Either
way the answer to it names the turn's prompt as its `originatingMessageId`, as the real
CLI's does. An abort drops injected messages not yet taken up. A `session.send` without
`mode` during a turn waits for the turn's end and runs as a turn of its own. In mode
`nosteer` (an older CLI) a `session.send` with a `mode` is refused: JSON-RPC error
-32602.
Every message it receives is appended to `received.jsonl` in its working folder.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

mode = sys.argv[1]
out = sys.stdout.buffer
inp = sys.stdin.buffer


def send(message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    out.write(b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
    out.flush()


def event(session: str, kind: str, **data: Any) -> None:
    send(
        {
            "method": "session.event",
            "params": {"sessionId": session, "event": {"type": kind, "data": data}},
        }
    )


def receive() -> dict[str, Any] | None:
    length = None
    while True:
        line = inp.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    assert length is not None
    message: dict[str, Any] = json.loads(inp.read(length))
    with open("received.jsonl", "a") as log:
        log.write(json.dumps(message) + "\n")
    return message


if mode == "exit":
    sys.stderr.write("boom: no licence for this machine\n")
    sys.exit(3)
if mode == "garbage":
    out.write(b"Welcome to the Copilot CLI!\r\n\r\n")
    out.flush()
    time.sleep(30)

turns = 0
active: dict[str, Any] | None = None  # the turn under way: session, user, how it waits
steering: list[tuple[str, str]] = []  # immediate messages for its next model call
queued: list[tuple[str, str, str]] = []  # (session, id, prompt) for after the turn


def new_user() -> str:
    global turns
    turns += 1
    return f"u{turns}"


def finish(text: str) -> None:
    """The turn's last model call answers `text`; then queued work, then idle."""
    global active
    assert active is not None
    session, user = active["session"], active["user"]
    event(session, "assistant.message", content=text, originatingMessageId=user)
    active = None
    for ident, content in steering:  # came during the last call: taken up now, queued
        event(session, "user.message", messageId=ident, content=content, delivery="queued")
        event(session, "assistant.message", content=f"heard: {content}", originatingMessageId=user)
    steering.clear()
    event(session, "session.idle")
    while queued and active is None:
        start(*queued.pop(0), delivery="queued")


def start(session: str, user: str, prompt: str, delivery: str = "idle") -> None:
    """A turn for `prompt` (its `user.message` already answered with `user`)."""
    global active
    event(session, "user.message", messageId=user, content=prompt, delivery=delivery)
    if "[shell]" in prompt:
        active = {"session": session, "user": user, "waits": f"perm-{user}"}
        event(
            session,
            "permission.requested",
            requestId=active["waits"],
            permissionRequest={
                "kind": "shell",
                "fullCommandText": "touch made-by-the-model",
                "intention": "Make a file",
            },
        )
    elif "[hold]" in prompt:
        active = {"session": session, "user": user, "waits": "hold"}
    elif "wait" in prompt:
        active = {"session": session, "user": user, "waits": "forever"}
    else:
        answer = f"fake answer {user[1:]}"
        event(session, "assistant.message", content=answer, originatingMessageId=user)
        event(session, "session.idle")


while (message := receive()) is not None:
    method, params, ident = message.get("method"), message.get("params", {}), message.get("id")
    if method is None:
        continue  # an answer to a request of ours
    if method == "connect":
        if mode == "silent":
            continue
        send(
            {
                "id": ident,
                "result": {
                    "ok": True,
                    "protocolVersion": 2 if mode == "old" else 3,
                    "version": "0.0.0-fake",
                },
            }
        )
    elif method in ("session.create", "session.resume"):
        if mode == "flood":
            event(params["sessionId"], "model.messages_snapshot", blob="x" * (9 * 1024 * 1024))
            send({"id": "cli-1", "method": "userInput.request", "params": {"question": "?"}})
        send({"id": ident, "result": {"sessionId": params["sessionId"]}})
    elif method == "session.send":
        if mode == "mute" and not turns:
            mode = "normal"  # the first prompt: accepted, and never answered
            continue
        if mode == "nosteer" and "mode" in params:
            error = {"code": -32602, "message": "Invalid params: unknown key 'mode'"}
            send({"id": ident, "error": error})
            continue
        session, prompt = params["sessionId"], params["prompt"]
        user = new_user()
        send({"id": ident, "result": {"messageId": user}})
        if active is None:
            start(session, user, prompt)
        elif params.get("mode") == "immediate":
            steering.append((user, prompt))
            if active["waits"] == "hold":  # its last model call ends now
                finish(f"fake answer {active['user'][1:]}")
        else:
            queued.append((session, user, prompt))
            if active["waits"] == "hold":
                finish(f"fake answer {active['user'][1:]}")
    elif method == "session.permissions.handlePendingPermissionRequest":
        send({"id": ident, "result": {"success": True}})
        if active is None or params.get("requestId") != active["waits"]:
            continue  # late: the turn it belonged to is over
        result = params["result"]
        if result.get("kind") == "approve-once":
            open("made-by-the-model", "w").close()
            text = "ran the tool"
        else:
            text = f"the tool was rejected: {result.get('feedback', '')}"
        event(active["session"], "permission.completed", requestId=active["waits"])
        for user, content in steering:  # the next model call: injected before it
            event(
                active["session"],
                "user.message",
                messageId=user,
                content=content,
                delivery="steering",
            )
            text += f"; heard: {content}"
        steering.clear()
        finish(text)
    elif method == "session.abort":
        active = None
        steering.clear()  # not taken up yet: dropped with the turn
        send({"id": ident, "result": {"success": mode != "refuse"}})
        if mode not in ("stubborn", "refuse"):
            event(params["sessionId"], "session.idle", aborted=True)
            while queued and active is None:
                start(*queued.pop(0), delivery="queued")
    else:
        send({"id": ident, "result": {}})
