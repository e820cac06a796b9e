"""The A2A JSON-RPC wire, sans-IO: the requests we send and what a peer answers.

Two dialects are spoken (as a2a-sdk 1.3 serves both): protocol 1.0 (a2a-sdk 1.x, method
names from the gRPC service, `A2A-Version: 1.0`, states `TASK_STATE_*`, stream
frames `{"task"|"message"|"statusUpdate"|"artifactUpdate": ...}`) and 0.3
(slash names, no version header, objects tagged with `kind`, lowercase
states, `final: true` on the last status update). Requests are built for the
dialect in use; answers are read whichever shape they come in, so a peer
that mixes them (a 0.3 compat layer over a 1.0 core) is still understood.

Everything a peer sends is checked as it is read: a frame that is not what
A2A says it is raises `A2AProtocolError` naming what was wrong and where,
never a `KeyError` from deep inside the adapter.

    A2AError                 the peer failed, or answered something unusable
    ├── A2AProtocolError     not JSON, not JSON-RPC, or not an A2A shape
    ├── A2ARpcError          a JSON-RPC error answer (its `code` and `message`)
    └── A2ATaskError         the task ended failed, rejected or canceled by the peer
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..contract import MAX_ANSWER_CHARS
from ..errors import PeerProtocolError, UpstreamError

__all__ = [
    "INTERRUPTED",
    "LIST_PAGE_SIZE",
    "METHOD_NOT_FOUND",
    "TASK_NOT_CANCELABLE",
    "TASK_NOT_FOUND",
    "TERMINAL",
    "V03",
    "V1",
    "VERSION_NOT_SUPPORTED",
    "A2AError",
    "A2AProtocolError",
    "A2ARpcError",
    "A2ATaskError",
    "Answer",
    "ArtifactUpdate",
    "Dialect",
    "Event",
    "Reply",
    "StatusUpdate",
    "TaskSnapshot",
    "decode",
    "event_of",
    "listed_tasks",
    "result_of",
    "task_of",
]

TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})
INTERRUPTED = frozenset({"input-required", "auth-required"})
"""States in which the task waits for the user: it is over for this turn."""

METHOD_NOT_FOUND = -32601
VERSION_NOT_SUPPORTED = -32009
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
LIST_PAGE_SIZE = 50
"""Tasks asked for per `ListTasks` page (A2A 1.0 allows 1 to 100; a2a-sdk's default)."""


class A2AError(UpstreamError):
    """The A2A peer failed the request, or answered something the adapter cannot use."""


class A2AProtocolError(A2AError):
    """The peer sent something that is not JSON-RPC or not an A2A shape."""


class A2ARpcError(A2AError):
    """The peer answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


class A2ATaskError(A2AError):
    """The task ended without an answer: failed, rejected, or canceled by the peer."""


# -- requests ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Dialect:
    """The method names, headers and message shape of one protocol version."""

    version: str
    send: str
    stream: str
    get: str
    cancel: str
    list: str | None
    """`ListTasks`, or None where the protocol has none (0.3)."""
    headers: dict[str, str]
    non_blocking: dict[str, bool]
    """`SendMessage.configuration` that answers with the task at once."""

    def message(
        self,
        text: str,
        message_id: str,
        *,
        context_id: str | None = None,
        task_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A user message with one text part, in this dialect's shape."""
        if self.version == "0.3":
            body: dict[str, Any] = {"kind": "message", "messageId": message_id, "role": "user"}
            body["parts"] = [{"kind": "text", "text": text}]
        else:
            body = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
        for key, value in (("contextId", context_id), ("taskId", task_id), ("metadata", metadata)):
            if value:
                body[key] = value
        return body

    def request(self, rpc_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}


V1 = Dialect(
    "1.0", "SendMessage", "SendStreamingMessage", "GetTask", "CancelTask", "ListTasks",
    {"A2A-Version": "1.0"}, {"returnImmediately": True},
)  # fmt: skip
V03 = Dialect(
    "0.3",
    "message/send",
    "message/stream",
    "tasks/get",
    "tasks/cancel",
    None,
    {},
    {"blocking": False},
)


# -- answers ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """A whole task: the first stream frame, a `SendMessage`/`GetTask`/`CancelTask` answer."""

    id: str
    context_id: str | None
    state: str
    status_text: str
    artifacts: tuple[tuple[str, str], ...]
    """(artifactId, text) in order."""
    agent_text: str
    """The text of the last agent message in the task's history (some agents answer so)."""
    message_ids: frozenset[str] = frozenset()
    """The `messageId`s of the task's history: which of our messages it answers."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A plain message answer: no task, so nothing to cancel."""

    context_id: str | None
    text: str


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    task_id: str
    context_id: str | None
    state: str
    text: str
    final: bool
    """0.3 only: the last update of the stream."""


@dataclass(frozen=True, slots=True)
class ArtifactUpdate:
    task_id: str
    context_id: str | None
    artifact_id: str
    text: str
    append: bool
    last_chunk: bool


Event = TaskSnapshot | Reply | StatusUpdate | ArtifactUpdate


def decode(raw: bytes | str, what: str) -> object:
    """JSON, or an `A2AProtocolError` quoting the start of what came instead."""
    try:
        return json.loads(raw)
    except ValueError:
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        raise A2AProtocolError(f"{what} is not JSON: {text[:200]!r}") from None


def result_of(envelope: object, what: str) -> dict[str, Any]:
    """The `result` of a JSON-RPC answer; its `error` raised as `A2ARpcError`."""
    body = _obj(envelope, what)
    error = body.get("error")
    if error is not None:
        error = _obj(error, f"{what}: error")
        code = error.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            raise A2AProtocolError(f"{what}: the error has no integer code: {error!r:.200}")
        raise A2ARpcError(code, str(error.get("message") or "no message"))
    if "result" not in body:
        raise A2AProtocolError(f"{what} is neither a JSON-RPC result nor an error: {body!r:.200}")
    return _obj(body["result"], f"{what}: result")


def event_of(result: dict[str, Any]) -> Event:
    """A stream frame's (or `SendMessage`'s) result as an event, 1.0 or 0.3 shaped."""
    kind = result.get("kind")
    if kind is not None:  # 0.3: the object itself, tagged
        readers = _BY_KIND
        body = result
    else:  # 1.0: {"task": {...}} and the like
        found = [key for key in _BY_KEY if key in result]
        if len(found) != 1:
            raise A2AProtocolError(
                f"an A2A answer holds none (or several) of task, message, statusUpdate,"
                f" artifactUpdate: {sorted(result)}"
            )
        kind, readers = found[0], _BY_KEY
        body = _obj(result[kind], kind)
    reader = readers.get(str(kind))
    if reader is None:
        raise A2AProtocolError(f"an A2A answer of unknown kind {kind!r}")
    return reader(body)


def task_of(result: dict[str, Any]) -> TaskSnapshot:
    """A `GetTask`/`CancelTask` result: the task itself (0.3: tagged `kind: task`)."""
    return _task(result)


def listed_tasks(result: dict[str, Any]) -> tuple[list[TaskSnapshot], str | None]:
    """A `ListTasks` result: its tasks, and the token of the next page (None: the last)."""
    tasks = [_task(_obj(t, "tasks[]")) for t in _list(result.get("tasks"), "tasks")]
    token = result.get("nextPageToken")
    return tasks, token if isinstance(token, str) and token else None


def _task(body: dict[str, Any]) -> TaskSnapshot:
    status = _obj(body.get("status"), "task.status")
    artifacts = tuple(
        (_str(a, "artifactId", "task.artifacts[]"), _text(a.get("parts"), "artifact.parts"))
        for a in (_obj(x, "task.artifacts[]") for x in _list(body.get("artifacts"), "artifacts"))
    )
    history = [_obj(x, "task.history[]") for x in _list(body.get("history"), "history")]
    agent = [
        _text(m.get("parts"), "history[].parts")
        for m in history
        if m.get("role") in ("ROLE_AGENT", "agent")
    ]
    return TaskSnapshot(
        id=_str(body, "id", "task"),
        context_id=_opt_str(body, "contextId", "task"),
        state=_state(status),
        status_text=_status_text(status),
        artifacts=artifacts,
        agent_text=agent[-1] if agent else "",
        message_ids=frozenset(
            m["messageId"] for m in history if isinstance(m.get("messageId"), str)
        ),
    )


def _reply(body: dict[str, Any]) -> Reply:
    return Reply(_opt_str(body, "contextId", "message"), _text(body.get("parts"), "message.parts"))


def _status(body: dict[str, Any]) -> StatusUpdate:
    status = _obj(body.get("status"), "statusUpdate.status")
    return StatusUpdate(
        task_id=_str(body, "taskId", "statusUpdate"),
        context_id=_opt_str(body, "contextId", "statusUpdate"),
        state=_state(status),
        text=_status_text(status),
        final=body.get("final") is True,
    )


def _artifact(body: dict[str, Any]) -> ArtifactUpdate:
    artifact = _obj(body.get("artifact"), "artifactUpdate.artifact")
    return ArtifactUpdate(
        task_id=_str(body, "taskId", "artifactUpdate"),
        context_id=_opt_str(body, "contextId", "artifactUpdate"),
        artifact_id=_str(artifact, "artifactId", "artifactUpdate.artifact"),
        text=_text(artifact.get("parts"), "artifact.parts"),
        append=body.get("append") is True,
        last_chunk=body.get("lastChunk") is True,
    )


_Reader = Callable[[dict[str, Any]], Event]
_BY_KEY: dict[str, _Reader] = {
    "task": _task,
    "message": _reply,
    "statusUpdate": _status,
    "artifactUpdate": _artifact,
}
_BY_KIND: dict[str, _Reader] = {
    "task": _task,
    "message": _reply,
    "status-update": _status,
    "artifact-update": _artifact,
}


def _state(status: dict[str, Any]) -> str:
    """`TASK_STATE_INPUT_REQUIRED` (1.0) and `input-required` (0.3) both read `input-required`."""
    raw = _str(status, "state", "status")
    return raw.removeprefix("TASK_STATE_").lower().replace("_", "-")


def _status_text(status: dict[str, Any]) -> str:
    message = status.get("message")
    return "" if message is None else _text(_obj(message, "status.message").get("parts"), "parts")


def _text(parts: object, where: str) -> str:
    """The text parts joined (file and data parts carry no text for a chat room)."""
    texts = []
    for part in _list(parts, where):
        text = _obj(part, f"{where}[]").get("text")
        if isinstance(text, str):
            texts.append(text)
    return "".join(texts)


def _obj(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise A2AProtocolError(f"{where} must be a JSON object, not {value!r:.200}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise A2AProtocolError(f"{where} must be a JSON array, not {value!r:.200}")
    return value


def _str(body: dict[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise A2AProtocolError(f"{where}.{key} must be a non-empty string, not {value!r:.100}")
    return value


def _opt_str(body: dict[str, Any], key: str, where: str) -> str | None:
    return _str(body, key, where) if body.get(key) is not None else None


# -- the answer, assembled --------------------------------------------------------------


@dataclass(slots=True)
class Answer:
    """What the peer said so far in one turn: the task, its state and its text.

    Artifact chunks are honoured as A2A defines them: `append: true` adds the
    chunk's parts to the artifact, otherwise the chunk replaces it (`lastChunk`
    only says no more will come: the text is whole either way); a task snapshot
    (the first frame, a `GetTask` answer) replaces everything."""

    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    status_text: str = ""
    agent_text: str = ""
    reply: str | None = None
    """The text of a plain message answer (no task)."""
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    final: bool = False
    limit: int = MAX_ANSWER_CHARS
    """Characters the artifacts may hold (`UpstreamPolicy.max_answer_chars`)."""
    _size: int = 0
    """Characters held in `artifacts` (bounded by `limit`)."""

    @property
    def over(self) -> bool:
        """The peer is done for this turn: a message, a terminal or waiting state, `final`."""
        return (
            self.reply is not None
            or self.final
            or (self.state is not None and self.state in TERMINAL | INTERRUPTED)
        )

    def add(self, event: Event) -> None:
        self.context_id = event.context_id or self.context_id
        if isinstance(event, Reply):
            self.reply = event.text
        elif isinstance(event, TaskSnapshot):
            self.task_id, self.state = event.id, event.state
            self.status_text = event.status_text or self.status_text
            self.agent_text = event.agent_text
            self.artifacts = {key: [text] for key, text in event.artifacts}
            self._size = sum(len(text) for _, text in event.artifacts)
        elif isinstance(event, StatusUpdate):
            self.task_id, self.state = self.task_id or event.task_id, event.state
            self.status_text = event.text or self.status_text
            self.final = self.final or event.final
        else:
            self.task_id = self.task_id or event.task_id
            chunks = self.artifacts.setdefault(event.artifact_id, [])
            if not event.append:
                self._size -= sum(map(len, chunks))
                chunks.clear()
            chunks.append(event.text)
            self._size += len(event.text)
            if self._size > self.limit:
                raise PeerProtocolError(f"the agent's answer ran past {self.limit} chars")

    def text(self) -> str:
        """The answer to post: the artifacts' text, else the status message, else the
        agent's last message in the history."""
        if self.reply is not None:
            return self.reply.strip()
        artifacts = "\n\n".join(
            t for t in ("".join(c).strip() for c in self.artifacts.values()) if t
        )
        return artifacts or self.status_text.strip() or self.agent_text.strip()
