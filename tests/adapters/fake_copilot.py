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
waiting: dict[str, Any] | None = None  # a permission request not yet answered
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
        turns += 1
        user = f"u{turns}"
        send({"id": ident, "result": {"messageId": user}})
        event(params["sessionId"], "user.message", messageId=user, content=params["prompt"])
        if "[shell]" in params["prompt"]:
            waiting = {"session": params["sessionId"], "user": user, "id": f"perm-{turns}"}
            event(
                params["sessionId"],
                "permission.requested",
                requestId=waiting["id"],
                permissionRequest={
                    "kind": "shell",
                    "fullCommandText": "touch made-by-the-model",
                    "intention": "Make a file",
                },
            )
        elif "wait" not in params["prompt"]:
            event(
                params["sessionId"],
                "assistant.message",
                content=f"fake answer {turns}",
                originatingMessageId=user,
            )
            event(params["sessionId"], "session.idle")
    elif method == "session.permissions.handlePendingPermissionRequest":
        send({"id": ident, "result": {"success": True}})
        if waiting is None or params.get("requestId") != waiting["id"]:
            continue  # late: the turn it belonged to is over
        result = params["result"]
        if result.get("kind") == "approve-once":
            open("made-by-the-model", "w").close()
            text = "ran the tool"
        else:
            text = f"the tool was rejected: {result.get('feedback', '')}"
        event(waiting["session"], "permission.completed", requestId=waiting["id"])
        event(
            waiting["session"],
            "assistant.message",
            content=text,
            originatingMessageId=waiting["user"],
        )
        event(waiting["session"], "session.idle")
        waiting = None
    elif method == "session.abort":
        waiting = None
        send({"id": ident, "result": {"success": mode != "refuse"}})
        if mode not in ("stubborn", "refuse"):
            event(params["sessionId"], "session.idle", aborted=True)
    else:
        send({"id": ident, "result": {}})
